"""The archiver's end of a trace (wakeline.runtime.tracing): each stored batch of events is one span
in every trace its records carry, child of the brain span that wrote the record, covering the
Postgres transaction that inserted them. Records without a context add nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from wakeline.runtime import tracing

T = TypeVar("T", bound=Sequence[Any])


def traced(store: Callable[[T], Awaitable[None]]) -> Callable[[T], Awaitable[None]]:
    """`store` of decoded (record, event) pairs, with a span per distinct parent in the batch."""
    async def stored(batch: T) -> None:
        parents: dict[tuple[int, int], Any] = {}
        for record, _ in batch:
            context = tracing.context_of(getattr(record, "headers", None))
            if context is not None:
                span_context = trace.get_current_span(context).get_span_context()
                parents.setdefault((span_context.trace_id, span_context.span_id), context)
        spans = [tracing.TRACER.start_span("archiver insert", context=context,
                                           attributes={"wakeline.batch_size": len(batch)})
                 for context in parents.values()]
        try:
            await store(batch)
        except BaseException as err:
            for span in spans:
                span.set_status(Status(StatusCode.ERROR, repr(err)))
            raise
        finally:
            for span in spans:
                span.end()
    return stored
