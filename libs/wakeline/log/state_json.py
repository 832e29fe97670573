"""`SessionState` as canonical JSON and back, and the hash of that form.

What a snapshot event carries (`events.SnapshotPayload`) and what the gateway's replay
shows. Sets are sorted lists, and `seen_commands` one base64 string of its sorted digests
(`digests.Digests`), so one state always renders the same bytes; the round trip
`state_from_json(state_to_json(s)) == s` is exact. `STATE_FORMAT` names the form this
code renders and the fold that derives it; snapshots themselves (when one is taken, how a
fold resumes from one, how verify checks one) are in `snapshots.py`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import TypeAdapter

from wakeline.log.chain import canonical_json
from wakeline.log.state import SessionState

_STATE: TypeAdapter[SessionState] = TypeAdapter(SessionState)
_SETS = ("awaiting_approval",)
# Bump when the fold derives another state from the same events with the same shape, or
# when the packing of `seen_commands` changes (the schema shows only a string). A change
# of shape (a field of the state, its config or a payload it holds) changes the schema's
# hash on its own. A snapshot of another format is not resumed from nor compared.
# 2: tool results' ids left the dedupe set; command ids kept as packed 64-bit digests.
# 3: a model turn's text block with more than its text (citations) folds to an OtherBlock.
FOLD_REVISION = 3
STATE_FORMAT = f"{FOLD_REVISION}.{hashlib.sha256(canonical_json(_STATE.json_schema())).hexdigest()[:12]}"


def state_to_json(state: SessionState) -> dict[str, Any]:
    data: dict[str, Any] = _STATE.dump_python(state, mode="json")
    for name in _SETS:
        data[name] = sorted(data[name])
    return data


def state_from_json(data: dict[str, Any]) -> SessionState:
    """The state `data` renders; raises `pydantic.ValidationError` if it renders none."""
    return _STATE.validate_python(data)


def state_hash(data: dict[str, Any]) -> str:
    """SHA-256 of the canonical bytes of a rendered state (`state_to_json`)."""
    return hashlib.sha256(canonical_json(data)).hexdigest()
