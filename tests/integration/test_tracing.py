"""One trace follows a command from the HTTP request through the brain, the runner and back,
to the archiver's insert: OpenTelemetry context in the Kafka record headers.

The four services run in this process (each its real `run`, on the real broker and
database) under one TracerProvider whose exporter is the SDK's in-memory one, so every span
they end is here to check; across processes the same headers carry the same context.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.integration.conftest_pg import require_postgres
from tests.integration.archiver_harness import seed_offsets_at_end
from tests.integration.fresh_groups import commit_group_at_end
from tests.integration.gateway_harness import gateway_settings, running_gateway
from wakeline.runtime import tracing
from wakeline.storage.pg import TenantPool
from wakeline.contract.topics import ARCHIVER_GROUP, BRAIN_GROUP, DEAD_LETTER, EVENTS, RUNNER_GROUP, TOOL_CALLS
from wakeline_archiver.app import run as run_archiver
from wakeline_archiver.settings import ArchiverSettings
from wakeline_brain.app import run as run_brain
from wakeline_brain.partitions import INPUT_TOPICS
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
    # Groups of this test's own, at the topics' ends: under the suite's default groups the
    # services would also take up what the e2e tests left there (see fresh_groups.py).
    groups = {name: f"{group}-trace-{uuid.uuid4().hex[:8]}"
              for name, group in (("brain", BRAIN_GROUP), ("runner", RUNNER_GROUP), ("archiver", ARCHIVER_GROUP))}
    archiver = ArchiverSettings(archiver_group=groups["archiver"], archiver_data_dir=tmp_path / "archiver",
                                archiver_lag_log_interval_s=60.0)
    await commit_group_at_end(archiver, groups["brain"], *INPUT_TOPICS)
    await commit_group_at_end(archiver, groups["runner"], TOOL_CALLS)
    async with TenantPool(archiver.postgres_dsn, min_size=1, max_size=1) as pool:
        await seed_offsets_at_end(archiver, pool, EVENTS, DEAD_LETTER)
    stop = asyncio.Event()
    services = {
        "archiver": asyncio.create_task(run_archiver(archiver, stop)),
        "runner": asyncio.create_task(run_runner(RunnerSettings(sandbox_root=tmp_path / "sandboxes", host=host,
                                                                group_id=groups["runner"]), stop)),
        "brain": asyncio.create_task(run_brain(BrainSettings(policy_dir=ROOT / "tests" / "e2e" / "policies", host=host,
                                                             static_membership=False, group_id=groups["brain"],
                                                             archiver_group=groups["archiver"]), stop)),
    }
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
        done, pending = await asyncio.wait(services.values(), timeout=60)
        stuck = {name: task.get_stack() for name, task in services.items() if task in pending}
        for task in pending:
            task.cancel()
    assert not stuck, f"services still running 60 s after stop: {stuck}"
    results = {name: task.exception() for name, task in services.items()}
    assert not [e for e in results.values() if e is not None], results

    spans = EXPORTER.get_finished_spans()
    # The gateway's server span is FastAPI's own (fastapi.telemetry), the root, with its
    # dependency, endpoint and serialization spans beneath; no second server span of ours.
    (http,) = [s for s in spans if s.name == "POST /v1/sessions" and s.kind == SpanKind.SERVER and s.parent is None]
    assert http.attributes["http.route"] == "/v1/sessions"
    traced = [s for s in spans if s.context.trace_id == http.context.trace_id]
    ids = {s.context.span_id: s for s in traced}
    assert [s for s in traced if s.kind == SpanKind.SERVER] == [http]
    (endpoint,) = [s for s in traced if s.name == "fastapi.endpoint"]
    assert endpoint.parent.span_id == http.context.span_id

    def ancestors(span) -> list:
        chain = []
        while span.parent is not None and span.parent.span_id in ids:
            span = ids[span.parent.span_id]
            chain.append(span)
        return chain

    def named(prefix: str) -> list:
        return [s for s in traced if s.name.startswith(prefix)]

    (create,) = named("brain CreateSession")
    assert ancestors(create)[0] == endpoint  # the route sent the inbox record, whose headers carry it
    assert http in ancestors(create)
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


# A service's start-up as lifecycle.serve does it (JSON logs, then tracing), then one span with a
# log line and a record's headers inside it; the process exits, which shuts the provider down
# (the SDK's atexit hook flushes what its batch processor holds).
TRACED_PROCESS = """
import json, logging
from opentelemetry import trace
from wakeline.runtime import logs, tracing
from wakeline.runtime.settings import CommonSettings

logs.configure("brain", "json")
configured = tracing.configure("brain", CommonSettings())
with tracing.TRACER.start_as_current_span("probe input", attributes={"wakeline.session_id": "s-probe"}) as span:
    logs.bind(session_id="s-probe")
    logging.getLogger("wakeline_brain.probe").info("inside the span")
    headers = tracing.headers()
    recording = span.is_recording()
print(json.dumps({"configured": configured, "provider": type(trace.get_tracer_provider()).__name__,
                  "recording": recording, "trace_id": format(span.get_span_context().trace_id, "032x"),
                  "headers": [[k, v.decode()] for k, v in headers or []]}))
"""


class OtlpSink(ThreadingHTTPServer):
    """An OTLP/HTTP collector on loopback: keeps each POST's path, content type and body."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.received.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def sink():
    server = OtlpSink()
    yield server
    server.shutdown()
    server.server_close()


def run_traced_process(**env: str) -> tuple[dict, list[dict]]:
    """(what the process printed, its JSON log lines), run in a fresh interpreter: the provider
    is set once per process, and this one's already has the in-memory exporter."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WAKELINE_OTLP", "OTEL_"))}
    done = subprocess.run([sys.executable, "-c", TRACED_PROCESS], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**clean, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), [json.loads(line) for line in done.stderr.splitlines()]


def test_with_an_otlp_endpoint_the_spans_are_exported_over_http_protobuf_and_logs_carry_the_trace_id(sink):
    printed, lines = run_traced_process(WAKELINE_OTLP_ENDPOINT=f"{sink.url}/v1/traces")
    assert printed["configured"] is True and printed["provider"] == "TracerProvider" and printed["recording"]
    trace_id = printed["trace_id"]
    assert [k for k, _ in printed["headers"]] == ["traceparent"] and trace_id in printed["headers"][0][1]
    (line,) = [line for line in lines if line["message"] == "inside the span"]
    assert (line["trace_id"], line["session_id"], line["service"]) == (trace_id, "s-probe", "brain")

    assert sink.received, "nothing reached the collector"
    assert {(path, kind) for path, kind, _ in sink.received} == {("/v1/traces", "application/x-protobuf")}
    spans, services = [], set()
    for _, _, body in sink.received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"}
            spans += [span for scope in resource_spans.scope_spans for span in scope.spans]
    assert services == {"wakeline-brain"}
    (span,) = spans
    assert (span.name, span.trace_id.hex()) == ("probe input", trace_id)
    assert {a.key: a.value.string_value for a in span.attributes} == {"wakeline.session_id": "s-probe"}


def test_without_an_endpoint_no_provider_is_installed_nothing_is_exported_and_no_header_written(sink):
    """The SDK's own variable pointing at a collector changes nothing: only WAKELINE_OTLP_ENDPOINT
    installs a provider."""
    printed, lines = run_traced_process(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{sink.url}/v1/traces")
    assert printed["configured"] is False
    assert printed["provider"] == "ProxyTracerProvider"  # the API's default: no SDK provider set
    assert printed["recording"] is False and printed["trace_id"] == "0" * 32
    assert printed["headers"] == []
    (line,) = [line for line in lines if line["message"] == "inside the span"]
    assert line["session_id"] == "s-probe" and "trace_id" not in line
    assert sink.received == []  # the process has exited: anything it would export was sent
    assert tracing.context_of([("other", b"x")]) is None
