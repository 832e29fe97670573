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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import TypeAdapter, ValidationError

from wakeline.log.chain import event_hash
from wakeline.evidence.checkpoints import (
    Checkpoint, load_key, read_anchor, signature_valid, stored_checkpoints,
)
from wakeline.storage.event_store import READ_COLUMNS, SELECT_LIST, event_from_row, is_error, tool_name
from wakeline.contract.events import GENESIS_HASH, CorruptEvent, Event, Frozen
from wakeline.log.fold import FoldError
from wakeline.storage.pg import TenantPool
from wakeline.evidence.proofs import InclusionProof, build_proof
from wakeline.storage.retention_cuts import Cut, retained_out, session_cuts
from wakeline.evidence.cross_check import Evidence
from wakeline.evidence.signed_checkpoints import SignedCut
from wakeline.log.snapshots import SnapshotMismatch, checked_fold
from wakeline.evidence.witnesses import EvidenceSettings, gather, public_key

# Enough to find the newest genuine one past a few forged rows; verify_all checks all.
RECENT_CHECKPOINTS = 8
_TS = TypeAdapter(datetime)
# One statement, so one snapshot: a row inserted meanwhile is in both sides or neither.
_ROWS = f"""
SELECT coalesce(e.seq, k.seq) AS at_seq, e.*, k.seq AS key_seq, k.event_id AS key_event_id,
       k.ts AS key_ts, encode(k.hash, 'hex') AS key_hash
FROM (SELECT {SELECT_LIST}, tool_name, is_error FROM events WHERE session_id = $1) e
FULL JOIN (SELECT * FROM event_keys WHERE session_id = $1) k ON e.seq = k.seq
ORDER BY at_seq, e.ts
"""


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


def row_problems(rows: Sequence[Any], retained: frozenset[int] = frozenset(),
                 start: tuple[str, int] = (GENESIS_HASH, 1)) -> list[Problem]:
    """What is wrong with a session's rows (joined with event_keys), in seq order.

    A seq in `retained` (dropped by retention) is absent from events by right. `start` is
    the hash the first row links to and its seq: a fork's are its parent's at the fork point.
    """
    problems: list[Problem] = []
    prev_hash, expected = start
    for row in rows:
        seq = row["at_seq"]
        if row["seq"] is None and seq in retained:
            # The tombstone's hash is what the first surviving row must link to.
            prev_hash, expected = row["key_hash"], seq + 1
            continue
        if row["seq"] is None:
            problems.append(Problem(seq=seq, reason=f"missing: seq {seq} is registered in event_keys "
                                                    "but absent from events"))
            # The registry still knows its hash, so the next row's link stays checkable.
            prev_hash, expected = row["key_hash"], seq + 1
            continue
        if seq < expected:
            problems.append(Problem(seq=seq, reason=f"duplicate: a second row for seq {seq}"))
            continue
        if seq > expected:
            missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
            problems.append(Problem(seq=expected, reason=f"gap: seq {missing} missing from events "
                                                         "and event_keys"))
        elif row["prev_hash"] != prev_hash:
            problems.append(Problem(seq=seq, reason=f"broken link: prev_hash does not match the hash "
                                                    f"of seq {seq - 1}"))
        problems.extend(Problem(seq=seq, reason=r) for r in _own_problems(row))
        prev_hash, expected = row["hash"], seq + 1
    return problems


def _own_problems(row: Any) -> Iterable[str]:
    """A row's hash against its own columns, its event_keys entry and its derived columns."""
    body = {c: row[c] for c in READ_COLUMNS}
    body["event_id"] = str(body["event_id"])
    body["ts"] = _TS.dump_python(body["ts"], mode="json")
    body["payload"] = json.loads(body["payload"])
    if event_hash(body) != row["hash"]:
        yield "hash mismatch: the stored columns do not hash to the stored hash"
    if row["key_seq"] is None:
        yield "not registered in event_keys"
    elif (row["key_hash"], row["key_event_id"], row["key_ts"]) != (row["hash"], row["event_id"], row["ts"]):
        yield "event_keys disagrees with events (hash, event_id or ts)"
    try:
        event = event_from_row({c: row[c] for c in READ_COLUMNS})
    except CorruptEvent as exc:
        cause = exc.__cause__
        errors = cause.error_count() if isinstance(cause, ValidationError) else 1
        yield f"not a valid event: {errors} validation error(s)"
        return
    if (row["tool_name"], row["is_error"]) != (tool_name(event), is_error(event)):
        yield "derived audit columns (tool_name, is_error) disagree with the payload"


def snapshot_problems(rows: Sequence[Any], retained: frozenset[int] = frozenset()) -> list[Problem]:
    """The first `snapshot` row that does not hold the fold of the rows before it.

    Checked only while the log folds from seq 1: a log cut by retention, a gap or a row
    that is not an event stops the check there (those are reported by `row_problems`).
    """
    if retained or not any(r["type"] == "snapshot" for r in rows if r["seq"] is not None):
        return []
    events: list[Event] = []
    for row in rows:
        if row["seq"] is None or row["seq"] != len(events) + 1:
            break
        try:
            events.append(event_from_row({c: row[c] for c in READ_COLUMNS}))
        except CorruptEvent:
            break
    try:
        checked_fold(events)
    except SnapshotMismatch as lie:
        return [Problem(seq=lie.seq, reason=f"snapshot disagrees with the fold of its prefix: {lie.reason}")]
    except FoldError:
        pass
    return []


def checkpoint_integrity(stored: Sequence[Checkpoint], anchored: Sequence[Checkpoint],
                         key: bytes | None) -> tuple[list[Problem], list[Checkpoint]]:
    """Each anchored checkpoint present and unchanged in the database, each signature valid.

    Returns the problems and the genuine checkpoints (all of them when there is no key).
    """
    problems = []
    in_db = {c.id: c for c in stored}
    for cp in anchored:
        if cp.id not in in_db:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} is in the anchor file "
                                                     "but missing from the database"))
        elif in_db[cp.id] != cp:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} in the database differs "
                                                     "from the anchor file"))
    genuine = []
    for cp in {c.model_dump_json(): c for c in [*stored, *anchored]}.values():
        if key is None or signature_valid(key, cp):
            genuine.append(cp)
        else:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} is tampered: "
                                                     "its signature does not verify"))
    return problems, genuine


def checkpoint_problems(session_id: str, stored: Sequence[Checkpoint], anchored: Sequence[Checkpoint],
                        key: bytes | None, hash_at: dict[int, str]) -> tuple[list[Problem], uuid.UUID | None]:
    """The checkpoints naming the session are genuine, and the newest agrees with the chain.

    Returns the problems and the id of the checkpoint the chain was compared with.
    """
    problems, genuine = checkpoint_integrity([c for c in stored if session_id in c.heads],
                                             [c for c in anchored if session_id in c.heads], key)
    if not genuine:
        return problems, None
    newest = max(genuine, key=lambda c: c.created_at)
    return problems + head_problems(session_id, newest, hash_at), newest.id


def head_problems(session_id: str, newest: Checkpoint, hash_at: dict[int, str]) -> list[Problem]:
    """The chain still holds, at the seq `newest` signed for the session, the hash it signed."""
    head = newest.heads[session_id]
    found = hash_at.get(head.seq)
    since = f"rewritten since checkpoint {newest.id}"
    if found is None:
        return [Problem(seq=head.seq, reason=f"{since}: seq {head.seq} it anchored is missing")]
    if found != head.hash:
        return [Problem(seq=head.seq, reason=f"{since}: hash at seq {head.seq} is {found[:16]}…, "
                                             f"the checkpoint signed {head.hash[:16]}…")]
    return []


def newest_per_session(genuine: Sequence[Checkpoint]) -> dict[str, Checkpoint]:
    newest: dict[str, Checkpoint] = {}
    for cp in sorted(genuine, key=lambda c: c.created_at):
        newest.update(dict.fromkeys(cp.heads, cp))
    return newest


def fork_point(rows: Sequence[Any]) -> tuple[str, int, str] | None:
    """(parent, fork_seq, parent_hash) when the first stored row is a `forked` event."""
    first = next((r for r in rows if r["seq"] is not None), None)
    if first is None or first["type"] != "forked":
        return None
    payload = json.loads(first["payload"]) if isinstance(first["payload"], str) else first["payload"]
    try:
        return str(payload["parent_session_id"]), int(payload["fork_seq"]), str(payload["parent_hash"])
    except (KeyError, TypeError, ValueError):
        return None  # not a valid event: row_problems reports it


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
    rows = await conn.fetch(_ROWS, session_id)
    if upto is not None:  # a parent checked for its fork: only the inherited part
        rows = [r for r in rows if r["at_seq"] <= upto]
    fork = fork_point(rows)
    # Cuts after rows: reading events took a lock that a drop's DETACH waits for until this
    # transaction ends, so no cut commits in between; the other way round one could.
    cuts = await session_cuts(conn, session_id)
    unsigned: list[Cut] = []
    if evidence is not None:
        unsigned = [c for c in cuts if not evidence.cut_signed(_signed(session_id, c))]
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


def _signed(session_id: str, cut: Cut) -> SignedCut:
    return SignedCut(range_from=cut.range_from, range_to=cut.range_to, session_id=session_id, seq=cut.seq,
                     hash=cut.hash)


def signed_head_problems(session_id: str, evidence: Evidence, hash_at: dict[int, str]) -> list[Problem]:
    """The chain still holds, at every seq a genuine signed checkpoint named for the session,
    the hash signed there: each distinct head once, named by the newest checkpoint signing it.

    Every one, not only the newest: a newest head that a signer was made to sign over a
    rewrite or a cut tail agrees with the rewritten chain; an older one does not.
    """
    problems = []
    for head, signed in evidence.signed_heads(session_id):
        found = hash_at.get(head.seq)
        since = f"rewritten since signed checkpoint {signed.label}"
        if found is None:
            problems.append(Problem(seq=head.seq, reason=f"{since}: seq {head.seq} it anchored is missing"))
        elif found != head.hash:
            problems.append(Problem(seq=head.seq, reason=f"{since}: hash at seq {head.seq} is {found[:16]}…, "
                                                         f"the checkpoint signed {head.hash[:16]}…"))
    return problems


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


class NoPublicKey(Exception):
    """Verify was asked to run without the signed checkpoints and was not told it may."""


async def _run(settings: EvidenceSettings, tenant: str, session_id: str | None,
               proof: bool = False, without_signed: bool = False) -> tuple[TenantReport, InclusionProof | None]:
    # The public key first: without it nothing below could tell a rewritten history from
    # the real one, so its absence is an error, not a quieter check (a host root need only
    # delete the file). Going on without it is a choice said out loud.
    public = public_key(settings)
    if public is None and not (without_signed or settings.verify_without_signed_checkpoints):
        raise NoPublicKey(
            f"no public key to check the signed checkpoints with (WAKELINE_EVIDENCE_PUBLIC_KEY, or the file "
            f"{settings.evidence_public_key_file}): refusing to verify on the hash chains and HMAC checkpoints alone. "
            "Configure the signer's public key (and pin it: WAKELINE_EVIDENCE_KEY_FINGERPRINT), or pass "
            "--without-signed-checkpoints (WAKELINE_VERIFY_WITHOUT_SIGNED_CHECKPOINTS=true) to check without them")
    if public is None:
        print("verify: --without-signed-checkpoints: signed checkpoints, their witnesses and signed retention cuts "
              "NOT checked (a consistent rewrite, a cut tail or a forged retention_log row go unseen)",
              file=sys.stderr)
    elif settings.evidence_key_fingerprint is None:
        print("verify: the public key is not pinned (WAKELINE_EVIDENCE_KEY_FINGERPRINT): whoever can replace "
              f"{settings.evidence_public_key_file} chooses the key checked", file=sys.stderr)
    key = load_key(settings.checkpoint_key_file, create=False)
    if key is None:
        print(f"verify: no key at {settings.checkpoint_key_file}: HMAC checkpoint signatures not checked",
              file=sys.stderr)
    anchored = read_anchor(settings.checkpoint_dir, tenant)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        evidence = None if public is None else await gather(pool, settings, settings.signer_sink_dir, tenant, public)
        if session_id is None:
            return await verify_all(pool, tenant, key=key, anchored=anchored, evidence=evidence), None
        async with pool.transaction(tenant) as conn:
            report = await verify_session(conn, session_id, key=key, anchored=anchored, evidence=evidence)
    found = build_proof(evidence, session_id) if proof and evidence is not None else None
    return TenantReport(tenant=tenant, ok=report.ok, sessions=(report,), checkpoint_problems=()), found


def main(argv: list[str] | None = None) -> int:
    """One JSON line per session (and, with --all, one for the tenant's checkpoints; with
    --proof, the session's inclusion proof as the last line).

    Exit 0 if all verify, 1 if anything is bad, 2 if the session is unknown, verification
    could not run (no public key without --without-signed-checkpoints, a key that is not
    the pinned one), or --proof found no signed checkpoint naming the session.
    """
    parser = argparse.ArgumentParser(prog="wakeline verify-direct")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("session_id", nargs="?")
    target.add_argument("--all", action="store_true")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--proof", action="store_true",
                        help="also print the session's head and Merkle path to a signed tenant root")
    parser.add_argument("--without-signed-checkpoints", action="store_true",
                        help="verify even with no public key: chains and HMAC checkpoints only (said on stderr)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.proof and args.all:
        parser.error("--proof is for one session")
    try:
        result, proof = asyncio.run(_run(EvidenceSettings(), args.tenant, None if args.all else args.session_id,
                                         args.proof, args.without_signed_checkpoints))
    except NoPublicKey as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, asyncpg.PostgresError) as exc:
        print(f"verify: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for report in result.sessions:
        print(report.model_dump_json(), flush=True)
    if args.all:
        print(result.model_dump_json(exclude={"sessions"}), flush=True)
    elif not result.sessions[0].found:
        print(f"verify: no session {args.session_id} in tenant {args.tenant}", file=sys.stderr)
        return 2
    if args.proof:
        if proof is None:
            print(f"verify: no signed checkpoint names {args.session_id} (or no public key): no proof",
                  file=sys.stderr)
            return 2
        print(proof.model_dump_json(), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
