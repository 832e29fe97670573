"""Verifying one session (`verify_session`) or every session of a tenant (`verify_all`).

Reads, in one tenant transaction per session, the checkpoints naming it, its rows and the
retention cuts that vouch for dropped seqs, and puts together what chain_checks.py and
checkpoint_checks.py find. A fork's inherited prefix is verified in its parent (and its
parents), up to the fork point.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from wakeline.evidence.checkpoints import Checkpoint, stored_checkpoints
from wakeline.contract.events import GENESIS_HASH
from wakeline.storage.pg import TenantPool
from wakeline.storage.retention_cuts import Cut, retained_out, session_cuts
from wakeline.evidence.cross_check import Evidence
from wakeline.evidence.verify.chain_checks import SESSION_ROWS, fork_point, row_problems, snapshot_problems
from wakeline.evidence.verify.checkpoint_checks import (
    checkpoint_integrity, checkpoint_problems, head_problems, newest_per_session, signed_cut, signed_head_problems,
)
from wakeline.evidence.verify.reports import PrefixReport, Problem, Report, TenantReport

# Enough to find the newest genuine one past a few forged rows; verify_all checks all.
RECENT_CHECKPOINTS = 8


async def prefix_report(conn: asyncpg.Connection, fork: tuple[str, int, str], depth: int) -> PrefixReport:
    """The parent's chain up to the fork point, and its hash there against the one the fork links to."""
    parent, fork_seq, parent_hash = fork
    report = await verify_session(conn, parent, vetted={}, upto=fork_seq, depth=depth + 1)
    held = await conn.fetchval("SELECT encode(hash, 'hex') FROM event_keys WHERE session_id = $1 AND seq = $2",
                               parent, fork_seq)
    problems = list(report.problems)
    if held != parent_hash:
        found = "no such seq" if held is None else f"hash {held[:16]}…"
        problems.append(Problem(seq=fork_seq, reason=f"fork point: {parent} holds {found} at seq {fork_seq}, "
                                                     f"the fork links to {parent_hash[:16]}…"))
    report = report.model_copy(update={"ok": not problems, "problems": tuple(problems)})
    return PrefixReport(parent_session_id=parent, fork_seq=fork_seq, parent_hash=parent_hash,
                        ok=not problems, events=report.events, retained_out=report.retained_out, parent=report)


async def verify_session(conn: asyncpg.Connection, session_id: str, *, key: bytes | None = None,
                         anchored: Sequence[Checkpoint] = (), newest: int = RECENT_CHECKPOINTS,
                         vetted: dict[str, Checkpoint] | None = None, upto: int | None = None,
                         depth: int = 0, evidence: Evidence | None = None,
                         tenant_problems: bool = True) -> Report:
    """Verifies one session of the tenant set on `conn` (a TenantPool transaction).

    `key` checks checkpoint signatures (None: not checked, said in the report); `anchored`
    are the tenant's checkpoints from the file outside the database. Only the `newest`
    checkpoints naming the session are looked at; `verify_all` checks every one once and
    passes `vetted`, the newest genuine checkpoint per session, read before any rows.

    `evidence` (witnesses.gather: the signed checkpoints as postgres, the topic and the
    sink hold them, cross-checked under the public key) adds: the chain against every
    head a genuine checkpoint signed for the session, and every retention cut signed by
    the signer (an unsigned one excuses nothing). With `tenant_problems`, the evidence's own problems (a forged or
    missing checkpoint) are the session's too, since each checkpoint's root covers it.
    """
    if vetted is None:
        recent = sorted((c for c in anchored if session_id in c.heads), key=lambda c: c.created_at)[-newest:]
        # Checkpoints before rows: every head a checkpoint read here names was committed
        # before it, so the rows read next include it.
        stored = await stored_checkpoints(conn, session_id, newest=newest, ids=[c.id for c in recent])
    else:
        recent, stored = [], [vetted[session_id]] if session_id in vetted else []
    rows = await conn.fetch(SESSION_ROWS, session_id)
    if upto is not None:  # a parent checked for its fork: only the inherited part
        rows = [r for r in rows if r["at_seq"] <= upto]
    fork = fork_point(rows)
    # Cuts after rows: reading events took a lock that a drop's DETACH waits for until this
    # transaction ends, so no cut commits in between; the other way round one could.
    cuts = await session_cuts(conn, session_id)
    unsigned: list[Cut] = []
    if evidence is not None:
        unsigned = [c for c in cuts if not evidence.cut_signed(signed_cut(session_id, c))]
        cuts = [c for c in cuts if c not in unsigned]
    retained, cut_found = retained_out(rows, cuts)
    cut_found.extend((c.seq, f"{c}: no signed checkpoint anchors this cut, so it excuses nothing (a drop "
                             "the signer never signed)") for c in unsigned)
    hash_at = {r["at_seq"]: r["key_hash"] for r in rows if r["at_seq"] in retained}
    hash_at.update({r["seq"]: r["hash"] for r in reversed(rows) if r["seq"] is not None})
    if vetted is None:
        found, checkpoint_id = checkpoint_problems(session_id, stored, recent, key, hash_at)
    else:
        found = head_problems(session_id, stored[0], hash_at) if stored else []
        checkpoint_id = stored[0].id if stored else None
    signed = evidence.newest_with(session_id) if evidence is not None else None
    if evidence is not None:
        found.extend(signed_head_problems(session_id, evidence, hash_at))
    if evidence is not None and tenant_problems:
        found.extend(Problem(seq=None, reason=p.reason) for p in evidence.problems)
    # By seq; problems of a checkpoint as a whole (no seq) last.
    start = (GENESIS_HASH, 1) if fork is None else (fork[2], fork[1] + 1)
    prefix = await prefix_report(conn, fork, depth) if fork is not None and depth < 100 else None
    inherited = [] if prefix is None or prefix.ok else [
        Problem(seq=fork[1] if fork else None, reason=f"inherited prefix from {prefix.parent_session_id}: "
                                                      f"{prefix.parent.reason}")]
    problems = sorted([*row_problems(rows, retained, start), *snapshot_problems(rows, retained), *inherited,
                       *(Problem(seq=s, reason=r) for s, r in cut_found), *found],
                      key=lambda p: (p.seq is None, p.seq or 0))
    first = problems[0] if problems else None
    seqs = [r["seq"] for r in rows if r["seq"] is not None]
    return Report(session_id=session_id, found=bool(rows or stored or recent), ok=not problems,
                  events=len(seqs), retained_out=len(retained), last_seq=max([*seqs, *retained], default=None),
                  first_bad_seq=first.seq if first else None, reason=first.reason if first else None,
                  problems=tuple(problems), checkpoint_id=checkpoint_id, signatures_checked=key is not None,
                  prefix=prefix,
                  signed_checkpoint=signed.statement.number if signed else None,
                  evidence_checked=evidence is not None,
                  witnesses_checked=tuple(evidence.counts) if evidence is not None else ())


async def session_ids(conn: asyncpg.Connection, anchored: Sequence[Checkpoint] = ()) -> list[str]:
    """Every session the tenant has a trace of: rows, registered keys or checkpoint heads."""
    rows = await conn.fetch("SELECT session_id FROM events UNION SELECT session_id FROM event_keys "
                            "UNION SELECT jsonb_object_keys(heads) FROM checkpoints "
                            "UNION SELECT jsonb_object_keys(heads) FROM signed_checkpoints")
    return sorted({r["session_id"] for r in rows} | {s for c in anchored for s in c.heads})


async def verify_all(pool: TenantPool, tenant: str, *, key: bytes | None = None,
                     anchored: Sequence[Checkpoint] = (), evidence: Evidence | None = None) -> TenantReport:
    """Every checkpoint of `tenant` once, then every session, each in its own transaction.

    Checkpoints are read and their signatures checked once, up front (a forged or missing
    one is a tenant-level problem); each session is then compared with the newest genuine
    checkpoint naming it. Checking them again per session made this quadratic.
    """
    async with pool.transaction(tenant) as conn:
        checkpoint_found, genuine = checkpoint_integrity(await stored_checkpoints(conn), anchored, key)
        ids = await session_ids(conn, anchored)
    vetted = newest_per_session(genuine)
    sessions = []
    for session_id in ids:
        async with pool.transaction(tenant) as conn:
            sessions.append(await verify_session(conn, session_id, key=key, anchored=anchored, vetted=vetted,
                                                 evidence=evidence, tenant_problems=False))
    if evidence is not None:  # once for the tenant, not once per session
        checkpoint_found.extend(Problem(seq=None, reason=p.reason) for p in evidence.problems)
    return TenantReport(tenant=tenant, ok=not checkpoint_found and all(r.ok for r in sessions),
                        sessions=tuple(sessions), checkpoint_problems=tuple(checkpoint_found))
