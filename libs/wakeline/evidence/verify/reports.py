"""What verify says: a `Problem` at a seq, a session's `Report` (with a fork's inherited
`PrefixReport`), a tenant's `TenantReport`; one JSON line each on the command line."""

from __future__ import annotations

import uuid

from wakeline.contract.events import Frozen


class Problem(Frozen):
    seq: int | None  # None: a checkpoint problem not tied to one seq
    reason: str


class PrefixReport(Frozen):
    """A fork's inherited history, checked where it lives: in its parent, up to the fork point."""

    parent_session_id: str
    fork_seq: int
    parent_hash: str
    ok: bool
    events: int  # the parent's own rows checked (its own prefix is in its own report)
    retained_out: int  # of those seqs, dropped by retention: that part of the history is gone
    parent: "Report"


class Report(Frozen):
    session_id: str
    found: bool  # any trace at all: rows, registered keys or a checkpoint naming it
    ok: bool
    events: int  # rows in events
    retained_out: int = 0  # seqs dropped by retention, vouched for by retention_log
    last_seq: int | None  # the last seq in events or retained out
    first_bad_seq: int | None
    reason: str | None
    problems: tuple[Problem, ...]
    checkpoint_id: uuid.UUID | None  # the checkpoint the chain was compared with
    signatures_checked: bool
    prefix: PrefixReport | None = None  # a fork's inherited history
    # The Ed25519-signed checkpoint (its number) the chain was compared with; None when
    # none names the session or no public key was given (`evidence_checked`).
    signed_checkpoint: int | None = None
    evidence_checked: bool = False
    # The witnesses of the signed checkpoints that were read and compared: all three for
    # `python -m wakeline.evidence.verify`, ["postgres"] for the gateway's /verify (it reads neither
    # the topic nor the sink), [] when no public key was given.
    witnesses_checked: tuple[str, ...] = ()


PrefixReport.model_rebuild()  # its `parent` is a Report, defined after it


class TenantReport(Frozen):
    tenant: str
    ok: bool
    sessions: tuple[Report, ...]
    checkpoint_problems: tuple[Problem, ...]  # any checkpoint of the tenant, forged or missing
