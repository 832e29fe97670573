"""`SessionState` as canonical JSON and back, and the hash of that form.

What a snapshot event carries (`events.SnapshotPayload`) and what the gateway's replay
shows. Sets are sorted lists, so one state always renders the same bytes; the round trip
`state_from_json(state_to_json(s)) == s` is exact. `seen_commands` (one 64-bit digest per
command the session has seen, `state.command_digest`) renders as one base64 string of the
sorted digests, 8 bytes each, big-endian: as a JSON list it would be three times the size,
and it is the one part of a state that grows with every command. `STATE_FORMAT` names the
form this code renders and the fold that derives it; snapshots themselves (when one is
taken, how a fold resumes from one, how verify checks one) are in `snapshots.py`.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from array import array
from typing import Any

from pydantic import TypeAdapter

from wakeline.chain import canonical_json
from wakeline.state import SessionState, evolve

_STATE: TypeAdapter[SessionState] = TypeAdapter(SessionState)
_SETS = ("awaiting_approval",)
_DIGESTS = "seen_commands"
# Bump when the fold derives another state from the same events with the same shape, or
# when the packed form of `seen_commands` changes (the schema does not show it). A change
# of shape (a field of the state, its config or a payload it holds) changes the schema's
# hash on its own. A snapshot of another format is not resumed from nor compared.
# 2: tool results' ids left the dedupe set; command ids kept as packed 64-bit digests.
FOLD_REVISION = 2
STATE_FORMAT = f"{FOLD_REVISION}.{hashlib.sha256(canonical_json(_STATE.json_schema())).hexdigest()[:12]}"


def state_to_json(state: SessionState) -> dict[str, Any]:
    data: dict[str, Any] = _STATE.dump_python(state, mode="json", exclude={_DIGESTS})
    for name in _SETS:
        data[name] = sorted(data[name])
    data[_DIGESTS] = _pack(state.seen_commands)
    return data


def state_from_json(data: dict[str, Any]) -> SessionState:
    """The state `data` renders; raises `pydantic.ValidationError` (or `ValueError` for a
    `seen_commands` that is not packed digests) if it renders none."""
    rest = dict(data)
    packed = rest.pop(_DIGESTS, "")
    return evolve(_STATE.validate_python(rest), seen_commands=_unpack(packed))


def state_hash(data: dict[str, Any]) -> str:
    """SHA-256 of the canonical bytes of a rendered state (`state_to_json`)."""
    return hashlib.sha256(canonical_json(data)).hexdigest()


def _pack(digests: frozenset[int]) -> str:
    packed = array("Q", sorted(digests))
    if sys.byteorder == "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _unpack(text: object) -> frozenset[int]:
    if not isinstance(text, str):
        raise ValueError(f"{_DIGESTS} is not a base64 string")
    raw = base64.b64decode(text, validate=True)
    if len(raw) % 8:
        raise ValueError(f"{_DIGESTS} is {len(raw)} bytes, not a whole number of 8-byte digests")
    digests = array("Q")
    digests.frombytes(raw)
    if sys.byteorder == "little":
        digests.byteswap()
    return frozenset(digests)
