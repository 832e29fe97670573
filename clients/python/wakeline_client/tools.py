"""Declared tools from typed functions: `@tool` and the registry a harness runs calls with.

    @tool
    def lookup_order(order_id: str, verbose: bool = False) -> dict:
        \"\"\"Find an order by its id.\"\"\"

`lookup_order.definition` is `{"name", "description", "input_schema"}` for the session's
config: the name is the function's, the description its docstring, the input schema what
pydantic makes of its parameters. Running a call validates the model's input against the
same parameters; any failure, the tool's own exceptions included, becomes a result with
`is_error=True`, so the model reads what went wrong instead of the harness stopping.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from wakeline_client.tool_calls import ToolCall, ToolResult


class Tool:
    def __init__(self, fn: Callable[..., Any], name: str | None = None, description: str | None = None):
        self.fn, self.name = fn, name or fn.__name__
        self.description = description if description is not None else inspect.cleandoc(fn.__doc__ or "")
        self.input_model = input_model(fn, self.name)
        self.is_async = inspect.iscoroutinefunction(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_model.model_json_schema()}

    def invoke(self, tool_input: dict[str, Any]) -> ToolResult:
        if self.is_async:
            return _failed(TypeError(f"tool {self.name!r} is async: run it with the async client"))
        try:
            return as_output(self.fn(**self._arguments(tool_input)))
        except Exception as err:  # the model reads the failure as the tool's answer
            return _failed(err)

    async def ainvoke(self, tool_input: dict[str, Any]) -> ToolResult:
        try:
            arguments = self._arguments(tool_input)
            if self.is_async:
                return as_output(await self.fn(**arguments))
            # A blocking function runs in a thread: the stream's heartbeats keep being read.
            return as_output(await asyncio.to_thread(self.fn, **arguments))
        except Exception as err:
            return _failed(err)

    def _arguments(self, tool_input: dict[str, Any]) -> dict[str, Any]:
        parsed = self.input_model.model_validate(tool_input)
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None) -> Any:
    """`@tool` or `@tool(name=..., description=...)`."""
    if fn is None:
        return lambda f: Tool(f, name, description)
    return Tool(fn, name, description)


def input_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    return create_model(f"{name}_input", __config__=ConfigDict(extra="forbid"), **fields)


class Tools:
    """The harness's tools by name; a call to any other name is answered as an error."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()):
        made = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self.by_name = {t.name: t for t in made}
        if len(self.by_name) != len(made):
            raise ValueError("two tools share a name")

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    @property
    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition for t in self.by_name.values()]

    def invoke(self, call: ToolCall) -> ToolResult:
        found = self.by_name.get(call.name)
        return found.invoke(call.input) if found else _unknown(call)

    async def ainvoke(self, call: ToolCall) -> ToolResult:
        found = self.by_name.get(call.name)
        return await found.ainvoke(call.input) if found else _unknown(call)


def as_tools(tools: Tools | Iterable[Tool | Callable[..., Any]] | None) -> Tools:
    return tools if isinstance(tools, Tools) else Tools(tools or ())


def as_output(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(output=value)
    if isinstance(value, BaseModel):
        return ToolResult(output=value.model_dump_json())
    return ToolResult(output=json.dumps(value, default=str, ensure_ascii=False))


def _failed(err: Exception) -> ToolResult:
    if isinstance(err, ValidationError):
        return ToolResult(output=f"invalid input: {err}", is_error=True)
    return ToolResult(output=f"{type(err).__name__}: {err}", is_error=True)


def _unknown(call: ToolCall) -> ToolResult:
    return ToolResult(output=f"no tool named {call.name!r} in this harness", is_error=True)
