"""Cutting a tool result down to the largest record the log takes, keeping it valid JSON.

Shared by the runner (its own results) and the gateway (a harness's posted result for a
declared tool), so output over the limit is cut and marked the same way wherever it comes from.

Every report the runner returns passes through `fit_report` (fresh results, errors and
replayed records alike). A report whose encoded size is over the budget keeps its shape:
each string in its output is cut to one length, the longest that fits (found by
bisection), and the output gains `truncated: true`, `original_bytes` (its size before
the cut) and `cut_to_chars`, so the model and the user can see what happened. Sizes are
the encoded bytes of the whole report: a control character in binary output is one byte
on disk, six once escaped in the output's JSON, seven once that is embedded in the report.
What does not fit here is not published: the brain wraps `output` into a `tool_result`
event of about the report's size, so the budget is `input_budget(max_record_bytes)`.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from wakeline.contract.commands import ToolResultReport

NOTE = "the output was too large to show; none of it is kept"


def fit_report(report: ToolResultReport, budget: int) -> ToolResultReport:
    """`report` itself if it fits in `budget` encoded bytes, else a cut copy that does."""
    if _size(report) <= budget:
        return report
    original_bytes = len(report.output.encode("utf-8", "replace"))
    value = _parsed(report.output)

    def output_for(cap: int) -> str:
        cut = _cut_strings(value, cap)
        marks = {"truncated": True, "original_bytes": original_bytes, "cut_to_chars": cap}
        return _dumps({**cut, **marks} if isinstance(cut, dict) else {"value": cut, **marks})

    def fits(cap: int) -> bool:
        return _size(report.model_copy(update={"output": output_for(cap)})) <= budget

    cap = _largest(fits, _longest_string(value))
    if cap is None:  # even empty strings are too many (a huge list): keep only the marks
        output = _dumps({"truncated": True, "original_bytes": original_bytes, "note": NOTE})
    else:
        output = output_for(cap)
    return report.model_copy(update={"output": output})


def _size(report: ToolResultReport) -> int:
    return len(report.model_dump_json().encode("utf-8"))


def _dumps(value: Any) -> str:
    # Compact, non-ASCII kept as is: the same shape pydantic gives an untouched output.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parsed(output: str) -> Any:
    """The output as JSON; text that is not JSON (an old or foreign record) becomes a field."""
    try:
        return json.loads(output)
    except ValueError:
        return {"text": output}


def _cut_strings(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return value[:cap]
    if isinstance(value, dict):
        return {key: _cut_strings(item, cap) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, cap) for item in value]
    return value


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_longest_string(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest_string(item) for item in value), default=0)
    return 0


def _largest(fits: Callable[[int], bool], upper: int) -> int | None:
    """The largest cap in [0, upper] that fits (fits is monotone), or None if none does."""
    if not fits(0):
        return None
    low, high = 0, upper  # invariant: fits(low)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
