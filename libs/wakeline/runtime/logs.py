"""How every service logs: one line per record, as text or JSON (`WAKELINE_LOG_FORMAT`), with
the session, seq, tool call and trace the line is about as fields.

`bind(session_id=..., seq=..., tool_call_id=...)` puts fields in the current context (a
contextvar): every line logged afterwards in that task, and in the tasks it starts, carries
them, so code that logs needs no extra argument. A session's actor binds its session id
when its task starts; the runner binds the session and tool call around each call. The
trace id is the current OpenTelemetry span's, when tracing is configured.

JSON: `{"ts", "level", "service", "logger", "message", "session_id", "seq", "tool_call_id",
"trace_id", "exc"}` (absent fields left out), for a log pipeline to index. Text (the local
stack's default, kept for people and for `make chaos`, which reads the brains' lines) is the
old format with the same fields appended as `key=value`.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

FIELDS = ("session_id", "seq", "tool_call_id", "trace_id")
_CONTEXT: ContextVar[dict[str, Any]] = ContextVar("wakeline_log_fields", default={})


def bind(**fields: Any) -> None:
    """Sets `fields` in the current context's log fields; a None value removes that field."""
    bound = {**_CONTEXT.get(), **fields}
    _CONTEXT.set({k: v for k, v in bound.items() if v is not None})


def fields() -> dict[str, Any]:
    """The fields bound in this context, and the current span's trace id if there is one."""
    found = dict(_CONTEXT.get())
    trace_id = _trace_id()
    if trace_id:
        found["trace_id"] = trace_id
    return found


def _trace_id() -> str | None:
    try:
        from opentelemetry import trace
    except ImportError:  # tracing is optional: without the API there is no span to name
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class _ContextFields(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in fields().items():
            if not hasattr(record, key):  # an explicit `extra=` wins
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "service": self.service, "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({key: getattr(record, key) for key in FIELDS if getattr(record, key, None) is not None})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self, service: str):
        super().__init__(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = " ".join(f"{key}={getattr(record, key)}" for key in FIELDS if getattr(record, key, None) is not None)
        return f"{text} [{extra}]" if extra else text


def configure(service: str, fmt: Literal["text", "json"] = "text", level: int = logging.INFO) -> None:
    """The root logger writes `fmt` lines to stderr, with the context's fields; replaces any handler."""
    handler = logging.StreamHandler()
    handler.addFilter(_ContextFields())
    handler.setFormatter(JsonFormatter(service) if fmt == "json" else TextFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
