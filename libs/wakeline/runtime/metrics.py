"""The metrics every service shares, the plumbing, and the endpoint each service serves them on.

Each service declares its own metrics in its `metrics.py`, beside the few wrappers and
samplers that feed them, so the hot code itself barely changes; what lives here is what
more than one process exports (consumer lag, dead letters) and the signer's (a program of
the library). docs/operations.md says what each metric means and the alert to set on it.

Every process serves `GET /metrics` on its own port (`serve_metrics`):
`WAKELINE_METRICS_PORT` when set (0: any free port, logged), else
`WAKELINE_METRICS_PORT_BASE` + the service's offset (brain +1, runner +2, archiver +3,
gateway +4, signer +5); a second clone on the machine moves its base. A port already taken is
logged as an error and the service runs on without metrics: a scrape target lost is not
worth a session.

Label values are bounded: tool names are the known tools or `other`, model adapters are
`scripted` or `anthropic`, dead-letter reasons are the rejection codes or `other` (the
whole reason is in the dead letter), routes are the path templates, never raw paths.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter, Gauge, start_http_server

from wakeline.runtime.settings import CommonSettings

log = logging.getLogger(__name__)

PORT_OFFSETS = {"brain": 1, "runner": 2, "archiver": 3, "gateway": 4, "signer": 5}
# Sub-millisecond to a minute: transactions, wakes, tool and model calls, HTTP requests.
SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

CONSUMER_LAG = Gauge("wakeline_consumer_lag", "Records in an assigned partition past this consumer's position "
                     "(high watermark minus position), sampled every second",
                     ["service", "topic", "partition"])
DEAD_LETTERS = Counter("wakeline_dead_letters_total", "Records sent to the dead-letter topic, by the service "
                       "that rejected them and the reason's code", ["service", "reason"])
# The checkpoint signer (wakeline.evidence.signer), per tenant: a tenant label is bounded by the
# tenants an operator created, and "which tenant is not anchored" is the question.
SIGNER_UNANCHORED = Gauge("wakeline_signer_unanchored_events", "Events of a tenant with a time after the newest "
                          "one its newest genuine signed checkpoint covers: not yet anchored", ["tenant"])
SIGNER_LAG = Gauge("wakeline_signer_lag_seconds", "A tenant's newest event time minus the newest event time its "
                   "newest genuine signed checkpoint covers (+Inf: nothing anchored yet)", ["tenant"])
SIGNER_ROUNDS = Counter("wakeline_signer_rounds_total", "Signer rounds, by outcome (signed, failed: refused as a "
                        "whole, or the database or the broker failed)", ["outcome"])
SIGNER_REFUSED_HEADS = Counter("wakeline_signer_refused_heads_total", "Session heads the signer refused to sign "
                               "(went back, changed at the same seq, or no longer chain to the head signed "
                               "before) and signed the old head for instead", ["tenant"])


def serve_metrics(settings: CommonSettings, service: str) -> int | None:
    """Starts the `/metrics` endpoint in a thread; the port it listens on, or None."""
    if not settings.metrics_enabled:
        return None
    port = settings.metrics_port if settings.metrics_port is not None \
        else settings.metrics_port_base + PORT_OFFSETS[service]
    try:
        server, _ = start_http_server(port, settings.metrics_host)
    except OSError as err:
        log.error("metrics: cannot listen on %s:%d (%s); running without metrics (set WAKELINE_METRICS_PORT "
                  "or WAKELINE_METRICS_PORT_BASE)", settings.metrics_host, port, err)
        return None
    bound = int(server.server_port)
    log.info("metrics on http://%s:%d/metrics", settings.metrics_host, bound)
    return bound


def reason_code(reason: str, codes: frozenset[str]) -> str:
    """A dead letter's reason as a bounded label: its leading code when it is a known one."""
    head = reason.split(":", 1)[0].strip()
    return head if head in codes else "other"


def every(interval_s: float, sample: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    """Runs `sample` every `interval_s` until cancelled; a failed sample is logged, not fatal."""
    async def loop() -> None:
        while True:
            try:
                await sample()
            except Exception as err:  # noqa: BLE001 - a missed sample is no failure of the service
                log.debug("metrics sample failed: %r", err)
            await asyncio.sleep(interval_s)
    return asyncio.create_task(loop())


async def sample_consumer_lag(consumer: Any, service: str) -> None:
    """High watermark minus position of each partition `consumer` (aiokafka) has, from what its
    fetches already learned; partitions it no longer has are dropped. Read-only: the position is
    read from the subscription state, never through `consumer.position()`, which waits for a
    reset and checks (and may raise) the coordinator's errors in the sampler's task."""
    seen = set()
    for tp in list(consumer.assignment()):
        high, position = consumer.highwater(tp), _known_position(consumer, tp)
        if high is None or position is None:
            continue
        CONSUMER_LAG.labels(service, tp.topic, str(tp.partition)).set(max(0, high - position))
        seen.add((tp.topic, str(tp.partition)))
    for labels in children(CONSUMER_LAG):
        if labels[0] == service and labels[1:] not in seen:
            CONSUMER_LAG.remove(*labels)


def _known_position(consumer: Any, tp: Any) -> int | None:
    try:  # aiokafka 0.14 keeps it here; its public position() may wait and has side effects
        state = consumer._subscription.subscription.assignment.state_value(tp)  # noqa: SLF001
        return int(state.position) if state is not None and state.has_valid_position else None
    except (AttributeError, TypeError):
        return None


def children(gauge: Gauge) -> list[tuple[str, ...]]:
    """The label values of each series `gauge` holds now."""
    return [tuple(labels) for labels in gauge._metrics]  # noqa: SLF001 - prometheus_client lists a metric's label sets nowhere else


class Stopwatch:
    """`with Stopwatch() as watch: ...; watch.seconds`: monotonic, for the histograms above."""

    def __enter__(self) -> Stopwatch:
        self._began = time.monotonic()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self._began
