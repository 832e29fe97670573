"""Traces across the services: OpenTelemetry context carried in Kafka record headers.

One trace follows a command: the gateway's HTTP span, whose context goes in the inbox
record's headers (W3C `traceparent`); the brain's span for that input, whose context goes in
every record it then writes (events, tool calls); the runner's span for each tool call,
whose context goes in the result; the brain's span for the result; and the archiver's span
for the batch insert that stored each traced event. Kafka sits between every two of them,
so the context travels in the records, not in a call stack.

Exported over OTLP/HTTP when `WAKELINE_OTLP_ENDPOINT` is set (`configure`); when it is not,
no provider is installed and the API's spans are no-ops: nothing is recorded, no header
is written. Tests install a provider with the SDK's in-memory exporter.

A consumer learns a record's context where it decodes the record (`remember(key, headers)`)
and continues it where it handles it (`follow(key, name)`), which may be another task: the
brain hands inputs to a session's actor through a mailbox, the runner runs a call in a task
of its own. `follow` attaches the new span's context to the handling task, so what that task
writes afterwards (`headers()`) and logs (wakeline.runtime.logs) carries it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import extract, inject

from wakeline.runtime.settings import CommonSettings

TRACER = trace.get_tracer("wakeline")
_REMEMBERED: OrderedDict[Hashable, Context] = OrderedDict()
_REMEMBER_AT_MOST = 10_000  # inputs decoded but not yet handled; the oldest are forgotten (untraced, not lost)

Headers = list[tuple[str, bytes]]


def configure(service: str, settings: CommonSettings) -> bool:
    """Installs an OTLP-exporting provider when an endpoint is configured; True if it did."""
    if not settings.otlp_endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"wakeline-{service}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
    trace.set_tracer_provider(provider)
    return True


def headers() -> Headers | None:
    """The current context as Kafka record headers; None when there is no span to continue."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return [(key, value.encode("ascii")) for key, value in carrier.items()] or None


def context_of(record_headers: Iterable[tuple[str, bytes]] | None) -> Context | None:
    """The trace context a record's headers carry, or None."""
    carrier = {key: value.decode("ascii", "replace") for key, value in record_headers or ()
               if isinstance(value, bytes)}
    return extract(carrier) if "traceparent" in carrier else None


def remember(key: Hashable, record_headers: Iterable[tuple[str, bytes]] | None) -> None:
    """Keeps the context of a decoded record until `follow(key, ...)` continues it."""
    found = context_of(record_headers)
    if found is None:
        return
    _REMEMBERED[key] = found
    while len(_REMEMBERED) > _REMEMBER_AT_MOST:
        _REMEMBERED.popitem(last=False)


def follow(key: Hashable, name: str, **attributes: Any) -> trace.Span | None:
    """A span continuing the context remembered under `key` (None if there is none), made
    current in this task from now on; the caller ends it."""
    parent = _REMEMBERED.pop(key, None)
    if parent is None:
        return None
    span = TRACER.start_span(name, context=parent, attributes=attributes)
    otel_context.attach(trace.set_span_in_context(span))
    return span
