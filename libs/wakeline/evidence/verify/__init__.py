"""Tamper evidence: `wakeline verify-direct SID|--all --tenant T` (= `python -m wakeline.evidence.verify`).

Recomputes a session's hash chain from its stored rows and compares it with the event_keys
registry, the newest HMAC checkpoint (checkpoints.py) and every head the Ed25519-signed
checkpoints name for it (signed_checkpoints.py), reporting the first bad seq and why.
The hash is recomputed over the raw columns, not a parsed event, so a value pydantic
would coerce back (1.0 for 1, "5" for 5) is still a changed byte. Seqs that retention
dropped are accepted as retained out when retention_log's cut vouches for them
(retention_cuts.py); the chain is then checked across the cut through their tombstones.
A log with `snapshot` events is folded from its first event and each snapshot compared
with the fold of its prefix: a correctly chained snapshot that lies is reported at its seq.
A fork's own rows start at its parent's seq + 1 with a `forked` event: its chain is checked
from the parent's hash there, and the inherited prefix is checked in the parent (and its
parents), up to the fork point (`Report.prefix`); a prefix retention dropped is said so.
Fixing anything is not done here: a bad report is evidence, kept as found.

The parts: reports.py (what verify says), chain_checks.py (the rows and snapshots),
checkpoint_checks.py (the chain against the checkpoints' heads), sessions.py (one session,
a tenant's all) and command.py (the command line). Every name is importable from here.
"""

from __future__ import annotations

from wakeline.evidence.verify.reports import PrefixReport, Problem, Report, TenantReport
from wakeline.evidence.verify.chain_checks import SESSION_ROWS, fork_point, row_problems, snapshot_problems
from wakeline.evidence.verify.checkpoint_checks import (
    checkpoint_integrity, checkpoint_problems, head_problems, newest_per_session, signed_cut, signed_head_problems,
)
from wakeline.evidence.verify.sessions import RECENT_CHECKPOINTS, prefix_report, session_ids, verify_all, verify_session
from wakeline.evidence.verify.command import NoPublicKey, main

__all__ = [
    "NoPublicKey", "PrefixReport", "Problem", "RECENT_CHECKPOINTS", "Report", "SESSION_ROWS", "TenantReport",
    "checkpoint_integrity", "checkpoint_problems", "fork_point", "head_problems", "main", "newest_per_session",
    "prefix_report", "row_problems", "session_ids", "signed_cut", "signed_head_problems", "snapshot_problems",
    "verify_all", "verify_session",
]
