"""An audit export's CSV form: a header, then one row per event with its payload as JSON.
Pure. (The JSONL form is each event's canonical JSON, written by the route.)"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from wakeline.storage.event_rows import is_error, tool_name
from wakeline.contract.events import Event

CSV_COLUMNS = ("ts", "session_id", "seq", "type", "actor", "tool_name", "is_error", "trust",
               "event_id", "causation_id", "prev_hash", "hash", "payload")
# A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_header() -> str:
    return _csv_line(CSV_COLUMNS)


def csv_row(event: Event) -> str:
    data = event.model_dump(mode="json")
    values = {**data, "payload": json.dumps(data["payload"], ensure_ascii=False, sort_keys=True),
              "tool_name": tool_name(event), "is_error": is_error(event)}
    return _csv_line(csv_cell(values.get(column)) for column in CSV_COLUMNS)


def _csv_line(cells: Any) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue()
