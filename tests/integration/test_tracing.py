"""One trace follows a command from the HTTP request through the brain, the runner and back,
to the archiver's insert: OpenTelemetry context in the Kafka record headers.

The four services run in this process (each its real `run`, on the real broker and
database) under one TracerProvider whose exporter is the SDK's in-memory one, so every span
they end is here to check; across processes the same headers carry the same context.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.integration.conftest_pg import require_postgres
from tests.integration.gateway_harness import gateway_settings, running_gateway
from wakeline import tracing
from wakeline.settings import CommonSettings
from wakeline_archiver.app import run as run_archiver
from wakeline_archiver.settings import ArchiverSettings
from wakeline_brain.app import run as run_brain
from wakeline_brain.settings import BrainSettings
from wakeline_runner.app import run as run_runner
from wakeline_runner.settings import RunnerSettings

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process: nothing else in the suite installs one
    yield provider


async def test_one_trace_runs_from_the_http_request_through_brain_and_runner_to_the_archive_insert(tmp_path):
    await require_postgres()
    host = f"trace-{uuid.uuid4().hex[:8]}"
    stop = asyncio.Event()
    services = [
        asyncio.create_task(run_archiver(ArchiverSettings(archiver_data_dir=tmp_path / "archiver",
                                                          archiver_lag_log_interval_s=60.0), stop)),
        asyncio.create_task(run_runner(RunnerSettings(sandbox_root=tmp_path / "sandboxes", host=host), stop)),
        asyncio.create_task(run_brain(BrainSettings(policy_dir=ROOT / "tests" / "e2e" / "policies", host=host,
                                                    static_membership=False), stop)),
    ]
    try:
        async with running_gateway(gateway_settings()) as (_, client):
            created = await client.post("/v1/sessions", json={"message": "go", "wait": False,
                                                              "config": {"model": "scripted:tools3"}})
            assert created.status_code in (201, 202), created.text
            sid = created.json()["session_id"]
            for _ in range(600):
                status = await client.get(f"/v1/sessions/{sid}")
                if status.status_code == 200 and status.json()["status"] == "ended":
                    break
                await asyncio.sleep(0.2)
            assert status.json()["ended_reason"] == "completed", status.text
            await asyncio.sleep(1.0)  # the archiver's last batch of the session
    finally:
        stop.set()
        results = await asyncio.wait_for(asyncio.gather(*services, return_exceptions=True), 60)
    assert not [r for r in results if isinstance(r, BaseException)], results

    spans = EXPORTER.get_finished_spans()
    # The gateway's span is the root; FastAPI adds its own route and dependency spans under it.
    (http,) = [s for s in spans if s.name == "POST /v1/sessions" and s.kind == SpanKind.SERVER and s.parent is None]
    traced = [s for s in spans if s.context.trace_id == http.context.trace_id]
    ids = {s.context.span_id: s for s in traced}

    def ancestors(span) -> list:
        chain = []
        while span.parent is not None and span.parent.span_id in ids:
            span = ids[span.parent.span_id]
            chain.append(span)
        return chain

    def named(prefix: str) -> list:
        return [s for s in traced if s.name.startswith(prefix)]

    (create,) = named("brain CreateSession")
    assert http in ancestors(create)  # through the inbox record's headers
    assert not [s for s in ancestors(create) if s.name.startswith("brain ")]
    assert create.attributes["wakeline.session_id"] == sid
    runner = named("runner ")
    assert sorted(s.name for s in runner) == ["runner bash", "runner list_files", "runner write_file"]
    assert all(ids[s.parent.span_id].name.startswith("brain ") for s in runner)  # through the tool-call records
    results_handled = named("brain ToolResultReport")
    assert len(results_handled) == 3
    assert {ids[s.parent.span_id].name for s in results_handled} == {s.name for s in runner}  # the result records
    models = named("model call")
    assert len(models) >= 4 and all(ids[s.parent.span_id].name.startswith("brain ") for s in models)
    inserts = named("archiver insert")
    assert inserts and all(ids[s.parent.span_id].name.startswith("brain ") for s in inserts)  # the events' headers
    assert {ids[s.parent.span_id].name for s in inserts} >= {"brain CreateSession"}
    assert all(http in ancestors(s) for s in [*runner, *results_handled, *models, *inserts])  # one trace, one root


def test_without_a_provider_or_an_endpoint_nothing_is_configured_and_no_header_is_written():
    assert tracing.configure("brain", CommonSettings()) is False  # no WAKELINE_OTLP_ENDPOINT
    assert tracing.headers() is None  # no current span outside any request
    assert tracing.context_of([("other", b"x")]) is None
