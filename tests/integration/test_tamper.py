"""Tamper evidence against the real database: a superuser who disables the append-only
triggers and changes a byte, removes a row, rewrites a whole chain consistently or forges a
checkpoint is reported by verify, every time. A legitimate retention drop is not: its seqs
are retained out, while a row removed around the cut still is reported."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from conftest_pg import (
    EVENT_COLUMNS, fresh_month, fresh_session_id, fresh_tenant, insert_event, maintenance_connection,
    require_postgres, service_connection, set_tenant,
)
from tests import factories
from tests.factories import Stamps, draft
from tampering import superuser, tampering
from wakeline.log.chain import Draft
from wakeline.evidence.checkpoints import Checkpoint, load_key, new_checkpoint, read_anchor, write_checkpoint
from wakeline.evidence.heads import Head
from wakeline.storage.event_rows import event_row
from wakeline.contract.events import GENESIS_HASH, Event, SnapshotPayload
from wakeline.log.fold import fold
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.log.state_json import STATE_FORMAT, state_hash, state_to_json
from wakeline.evidence.verify import Report, verify_all, verify_session

pytestmark = pytest.mark.postgres

DRAFTS = [
    draft("session_created", config={}, owner=factories.SPEAKERS.user),
    draft("user_message", text="list the files"),
    draft("model_turn", text="Let me look.", tool_call_ids=["tc-1"]),
    draft("tool_call", tool_call_id="tc-1", name="bash", input={"cmd": "ls"}),
    draft("tool_result", tool_call_id="tc-1", name="bash", output="a.txt\n"),
    draft("model_turn", text="There is one file, a.txt."),
]


def sealed(tenant: str, session_id: str, drafts: Sequence[Draft] = DRAFTS, at: Sequence[datetime] = ()) -> list[Event]:
    """The drafts as a chain, at times `at` (default: a millisecond apart from now)."""
    t0 = datetime.now(UTC)
    times = at or [t0 + timedelta(milliseconds=seq) for seq in range(1, len(drafts) + 1)]
    if len(times) != len(drafts):
        raise ValueError(f"{len(drafts)} drafts but {len(times)} times")
    return factories.sealed(drafts, session_id, tenant=tenant, stamps=factories.at(times))


def as_row(event: Event) -> dict:
    row = dict(zip(EVENT_COLUMNS, event_row(event)))
    return {**row, "payload": json.loads(row["payload"])}


class Setup:
    """A fresh tenant with one valid six-event session and a checkpoint of it."""

    def __init__(self, pool: TenantPool, directory: Path, key: bytes) -> None:
        self.pool, self.directory, self.key = pool, directory, key
        self.tenant, self.session_id = fresh_tenant(), fresh_session_id()
        self.events = sealed(self.tenant, self.session_id)
        self.checkpoint: Checkpoint | None = None

    async def create(self) -> Setup:
        async with service_connection() as conn, conn.transaction():
            await set_tenant(conn, self.tenant)
            for event in self.events:
                await insert_event(conn, as_row(event))
        self.checkpoint = await write_checkpoint(self.pool, self.key, self.tenant, directory=self.directory)
        return self

    async def verify(self, session_id: str | None = None) -> Report:
        async with self.pool.transaction(self.tenant) as conn:
            return await verify_session(conn, session_id or self.session_id, key=self.key,
                                        anchored=read_anchor(self.directory, self.tenant))


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    await require_postgres()
    key = load_key(tmp_path / "keys" / "checkpoint.key")
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        yield await Setup(pool, tmp_path / "checkpoints", key).create()


def reasons(report: Report) -> list[tuple[int | None, str]]:
    return [(p.seq, p.reason) for p in report.problems]


async def test_an_untouched_session_verifies_against_its_checkpoint(setup: Setup) -> None:
    report = await setup.verify()
    assert report.ok and report.found and report.problems == ()
    assert (report.events, report.last_seq, report.checkpoint_id) == (6, 6, setup.checkpoint.id)
    assert report.signatures_checked


async def test_triggers_still_refuse_changes_after_a_tampering_transaction(setup: Setup) -> None:
    async with superuser() as conn:
        async with tampering(conn, setup.events) as partition:
            pass
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1", setup.session_id)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM checkpoints WHERE tenant = $1", setup.tenant)


@pytest.mark.parametrize(("column_change", "seq", "reason"), [
    ("payload = replace(payload::text, 'list the files', 'list the filez')::jsonb", 2, "hash mismatch"),
    ("payload = jsonb_set(payload, '{input,cmd}', '\"rm -rf /\"')", 4, "hash mismatch"),
    ("actor = 'user:mallory'", 2, "hash mismatch"),
    ("ts = ts + interval '1 microsecond'", 3, "hash mismatch"),
    ("trust = 'instruction'", 5, "hash mismatch"),
    ("causation_id = 'cmd-forged'", 1, "hash mismatch"),
    # 0.0 where the writer stored 0: a value pydantic would coerce back is still a change.
    ("payload = jsonb_set(payload, '{usage,input_tokens}', '0.0')", 6, "hash mismatch"),
    ("tool_name = 'read_file'", 4, "derived audit columns"),
    ("is_error = true", 5, "derived audit columns"),
])
async def test_one_changed_column_is_reported_at_its_seq(setup: Setup, column_change: str, seq: int,
                                                         reason: str) -> None:
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        changed = await conn.execute(f"UPDATE {partition} SET {column_change} WHERE session_id = $1 AND seq = $2",
                                     setup.session_id, seq)
    assert changed == "UPDATE 1"
    report = await setup.verify()
    assert not report.ok and report.first_bad_seq == seq
    assert report.reason.startswith(reason), reasons(report)


async def test_a_deleted_row_is_reported_as_a_gap_at_its_seq(setup: Setup) -> None:
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1 AND seq = 3", setup.session_id)
        await conn.execute("DELETE FROM event_keys WHERE session_id = $1 AND seq = 3", setup.session_id)
    report = await setup.verify()
    assert (report.ok, report.first_bad_seq, report.events) == (False, 3, 5)
    assert report.reason == "gap: seq 3 missing from events and event_keys"


async def test_a_row_deleted_from_events_alone_is_reported_from_the_key_registry(setup: Setup) -> None:
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1 AND seq = 3", setup.session_id)
    report = await setup.verify()
    # The registry keeps seq 3's hash, so seq 4's link still checks out: one problem only.
    assert reasons(report) == [(3, "missing: seq 3 is registered in event_keys but absent from events")]


async def test_a_cut_off_tail_is_reported_against_the_checkpoint(setup: Setup) -> None:
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1 AND seq >= 5", setup.session_id)
        await conn.execute("DELETE FROM event_keys WHERE session_id = $1 AND seq >= 5", setup.session_id)
    report = await setup.verify()
    since = f"rewritten since checkpoint {setup.checkpoint.id}"
    assert reasons(report) == [(6, f"{since}: seq 6 it anchored is missing")]


async def rewrite_consistently(setup: Setup) -> list[Event]:
    """Changes event 2's text and re-seals 2..6 with the same ids and times: a valid chain."""
    drafts = [*DRAFTS]
    drafts[1] = draft("user_message", text="delete the files")
    original = setup.events
    same_ids_and_times = Stamps(ts=lambda seq: original[seq - 1].ts,
                                event_id=lambda session_id, seq: original[seq - 1].event_id)
    resealed = factories.sealed(drafts, setup.session_id, tenant=setup.tenant, stamps=same_ids_and_times)
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        for event in resealed[1:]:
            await conn.execute(f"UPDATE {partition} SET payload = $3::jsonb, "
                               "prev_hash = decode($4, 'hex'), hash = decode($5, 'hex') "
                               "WHERE session_id = $1 AND seq = $2", event.session_id, event.seq,
                               event.payload.model_dump_json(), event.prev_hash, event.hash)
            await conn.execute("UPDATE event_keys SET hash = decode($3, 'hex') WHERE session_id = $1 AND seq = $2",
                               event.session_id, event.seq, event.hash)
    assert resealed[0] == setup.events[0] and resealed[1].hash != setup.events[1].hash
    return resealed


async def test_a_consistently_rewritten_chain_is_reported_rewritten_since_the_checkpoint(setup: Setup) -> None:
    resealed = await rewrite_consistently(setup)
    report = await setup.verify()
    # Only the checkpoint tells: every stored hash, link and key is consistent.
    now, signed = resealed[-1].hash[:16], setup.events[-1].hash[:16]
    assert reasons(report) == [(6, f"rewritten since checkpoint {setup.checkpoint.id}: hash at seq 6 is "
                                   f"{now}…, the checkpoint signed {signed}…")]


async def test_a_rewrite_that_also_removes_the_checkpoint_rows_is_caught_by_the_anchor_file(setup: Setup) -> None:
    await rewrite_consistently(setup)
    async with superuser() as conn, tampering(conn, setup.events):
        await conn.execute("DELETE FROM checkpoints WHERE tenant = $1", setup.tenant)
    found = {reason for _, reason in reasons(await setup.verify())}
    assert f"checkpoint {setup.checkpoint.id} is in the anchor file but missing from the database" in found
    assert any(r.startswith(f"rewritten since checkpoint {setup.checkpoint.id}") for r in found)


async def test_a_checkpoint_row_altered_to_match_a_rewrite_is_reported_forged(setup: Setup) -> None:
    resealed = await rewrite_consistently(setup)
    forged_heads = json.dumps({setup.session_id: {"seq": 6, "hash": resealed[-1].hash}})
    async with superuser() as conn, tampering(conn, setup.events):
        await conn.execute("UPDATE checkpoints SET heads = $2::jsonb WHERE id = $1",
                           setup.checkpoint.id, forged_heads)
    found = {reason for _, reason in reasons(await setup.verify())}
    assert f"checkpoint {setup.checkpoint.id} is tampered: its signature does not verify" in found
    assert f"checkpoint {setup.checkpoint.id} in the database differs from the anchor file" in found
    assert any(r.startswith(f"rewritten since checkpoint {setup.checkpoint.id}") for r in found)


async def test_a_newer_checkpoint_row_signed_without_the_key_is_reported_and_ignored(setup: Setup) -> None:
    resealed = await rewrite_consistently(setup)
    forgery = new_checkpoint(b"guessed-key", setup.tenant, {setup.session_id: Head(seq=6, hash=resealed[-1].hash)},
                             setup.checkpoint.created_at + timedelta(minutes=1))
    async with superuser() as conn:
        await conn.execute("INSERT INTO checkpoints (id, tenant, created_at, heads, signature) "
                           "VALUES ($1, $2, $3, $4::jsonb, $5)", forgery.id, forgery.tenant,
                           forgery.created_at, json.dumps(forgery.model_dump(mode="json")["heads"]),
                           forgery.signature)
    report = await setup.verify()
    found = {reason for _, reason in reasons(report)}
    assert f"checkpoint {forgery.id} is tampered: its signature does not verify" in found
    assert report.checkpoint_id == setup.checkpoint.id and report.first_bad_seq == 6


async def test_verify_all_reports_a_forged_checkpoint_naming_no_session(setup: Setup) -> None:
    forgery = new_checkpoint(b"guessed-key", setup.tenant, {}, setup.checkpoint.created_at)
    async with superuser() as conn:
        await conn.execute("INSERT INTO checkpoints (id, tenant, created_at, heads, signature) "
                           "VALUES ($1, $2, $3, '{}'::jsonb, $4)", forgery.id, forgery.tenant,
                           forgery.created_at, forgery.signature)
    result = await verify_all(setup.pool, setup.tenant, key=setup.key,
                              anchored=read_anchor(setup.directory, setup.tenant))
    assert [r.ok for r in result.sessions] == [True] and not result.ok
    assert [p.reason for p in result.checkpoint_problems] == [
        f"checkpoint {forgery.id} is tampered: its signature does not verify"]


async def test_verify_all_reports_only_the_tampered_session_of_the_tenant(setup: Setup) -> None:
    other = sealed(setup.tenant, fresh_session_id())
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, setup.tenant)
        for event in other:
            await insert_event(conn, as_row(event))
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        await conn.execute(f"UPDATE {partition} SET actor = 'user:mallory' WHERE session_id = $1 AND seq = 1",
                           setup.session_id)
    result = await verify_all(setup.pool, setup.tenant, key=setup.key,
                              anchored=read_anchor(setup.directory, setup.tenant))
    assert {r.session_id: (r.ok, r.first_bad_seq) for r in result.sessions} == {
        setup.session_id: (False, 1), other[0].session_id: (True, None)}
    assert (result.ok, result.checkpoint_problems) == (False, ())


async def test_the_cli_prints_json_and_exits_1_on_a_tampered_session(setup: Setup) -> None:
    async def cli(*args: str) -> tuple[int, list[dict]]:
        env = {**os.environ,  # keeps WAKELINE_POSTGRES_DSN etc. when the stack is not on the defaults
               "WAKELINE_CHECKPOINT_KEY_FILE": str(setup.directory.parent / "keys" / "checkpoint.key"),
               "WAKELINE_CHECKPOINT_DIR": str(setup.directory),
               # The HMAC checkpoints alone, said so: without a public key verify refuses
               # unless told (tests/integration/test_evidence.py holds that refusal).
               "WAKELINE_EVIDENCE_PUBLIC_KEY_FILE": str(setup.directory.parent / "no-signer.key.pub")}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "wakeline.evidence.verify", *args,
                                                    "--tenant", setup.tenant, "--without-signed-checkpoints", env=env,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, [json.loads(line) for line in out.decode().splitlines()]

    assert (await cli(setup.session_id))[0] == 0
    async with superuser() as conn, tampering(conn, setup.events) as partition:
        await conn.execute(f"UPDATE {partition} SET payload = jsonb_set(payload, '{{text}}', '\"x\"') "
                           "WHERE session_id = $1 AND seq = 6", setup.session_id)
    code, lines = await cli("--all")
    assert code == 1 and [(r["session_id"], r["first_bad_seq"]) for r in lines[:-1]] == [(setup.session_id, 6)]
    assert lines[-1] == {"tenant": setup.tenant, "ok": False, "checkpoint_problems": []}
    assert (await cli("no-such-session"))[0] == 2


# -- across a retention cut ------------------------------------------------------------------

DAY = timedelta(days=1)
DROP = "SELECT * FROM drop_events_partition($1, $2, $3)"
MISSING = "missing: seq {} is registered in event_keys but absent from events"


class CutSetup(Setup):
    """Setup's tenant and key, across a retention cut. `session_id` has seqs 1..3 in a far-past
    month that retention drops and 4..6 in a later one that stays (`surviving`); `whole_id`
    lies entirely in the dropped month. One checkpoint, written before the drop, names both."""

    def __init__(self, pool: TenantPool, directory: Path, key: bytes, dropped: tuple, kept: tuple) -> None:
        super().__init__(pool, directory, key)
        (self.dropped, dropped_from, self.dropped_to), (self.kept, self.kept_from, self.kept_to) = dropped, kept
        times = [start + DAY + timedelta(minutes=i) for start in (dropped_from, self.kept_from) for i in range(3)]
        self.events = sealed(self.tenant, self.session_id, at=times)
        self.surviving = self.events[3:]
        self.whole_id = fresh_session_id()
        self.whole = sealed(self.tenant, self.whole_id, DRAFTS[:2], at=times[:2])

    async def create(self) -> CutSetup:
        async with service_connection() as conn, conn.transaction():
            await set_tenant(conn, self.tenant)
            for event in [*self.events, *self.whole]:
                await insert_event(conn, as_row(event))
        self.checkpoint = await write_checkpoint(self.pool, self.key, self.tenant, directory=self.directory)
        assert self.checkpoint.heads == {self.session_id: Head(seq=6, hash=self.events[-1].hash),
                                         self.whole_id: Head(seq=2, hash=self.whole[-1].hash)}
        async with maintenance_connection() as conn:
            entry = await conn.fetchrow(DROP, self.dropped, self.dropped_to + DAY, DAY)
        assert entry["event_count"] == 5
        return self

    async def drop_kept(self) -> None:
        async with maintenance_connection() as conn:
            await conn.fetchrow(DROP, self.kept, self.kept_to + DAY, DAY)


@pytest.fixture
async def cut(tmp_path: Path) -> AsyncIterator[CutSetup]:
    await require_postgres()
    key = load_key(tmp_path / "keys" / "checkpoint.key")
    dropped = await fresh_month()
    while (kept := await fresh_month()) == dropped:
        pass
    async with TenantPool(CommonSettings().postgres_dsn, min_size=1, max_size=2) as pool:
        setup = CutSetup(pool, tmp_path / "checkpoints", key, dropped, kept)
        try:
            yield await setup.create()
        finally:
            await setup.drop_kept()  # the test's far-past months are not left behind


async def test_a_retention_drop_verifies_with_the_dropped_seqs_retained_out(cut: CutSetup) -> None:
    report = await cut.verify()
    assert (report.ok, report.problems, report.checkpoint_id) == (True, (), cut.checkpoint.id)
    assert (report.events, report.retained_out, report.last_seq) == (3, 3, 6)
    # Its checkpoint anchored seq 2, which retention dropped: compared with the tombstone.
    whole = await cut.verify(cut.whole_id)
    assert (whole.ok, whole.problems, whole.checkpoint_id) == (True, (), cut.checkpoint.id)
    assert (whole.found, whole.events, whole.retained_out, whole.last_seq) == (True, 0, 2, 2)
    result = await verify_all(cut.pool, cut.tenant, key=cut.key, anchored=read_anchor(cut.directory, cut.tenant))
    assert result.ok and {r.session_id: r.retained_out for r in result.sessions} == {cut.session_id: 3,
                                                                                   cut.whole_id: 2}


async def test_a_row_deleted_from_a_surviving_month_after_a_drop_is_still_missing(cut: CutSetup) -> None:
    async with superuser() as conn, tampering(conn, cut.surviving) as partition:
        await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1 AND seq = 5", cut.session_id)
    report = await cut.verify()
    assert reasons(report) == [(5, MISSING.format(5))]
    assert (report.events, report.retained_out) == (2, 3)


async def test_a_first_surviving_row_that_does_not_link_to_the_cut_is_reported(cut: CutSetup) -> None:
    async with superuser() as conn, tampering(conn, cut.surviving) as partition:
        await conn.execute(f"UPDATE {partition} SET prev_hash = decode($2, 'hex') WHERE session_id = $1 AND seq = 4",
                           cut.session_id, GENESIS_HASH)
    report = await cut.verify()
    assert (report.first_bad_seq, report.retained_out) == (4, 3)
    assert report.reason == "broken link: prev_hash does not match the hash of seq 3", reasons(report)


async def test_a_tombstone_that_disagrees_with_the_retention_log_voids_the_cut(cut: CutSetup) -> None:
    async with superuser() as conn, tampering(conn, cut.surviving):
        await conn.execute("UPDATE event_keys SET hash = decode($2, 'hex') WHERE session_id = $1 AND seq = 3",
                           cut.session_id, "f" * 64)
    report = await cut.verify()
    found = reasons(report)
    assert report.retained_out == 0 and report.first_bad_seq == 1
    assert [seq for seq, reason in found if reason.startswith("missing")] == [1, 2, 3]
    assert any(seq == 3 and "its chain head disagrees with event_keys at seq 3" in reason for seq, reason in found)
    assert (await cut.verify(cut.whole_id)).ok  # the other session's side of the same cut stands


async def test_a_forged_retention_log_entry_does_not_excuse_a_deleted_row(cut: CutSetup) -> None:
    deleted = cut.surviving[1]
    forged_head = json.dumps([{"tenant": cut.tenant, "session_id": cut.session_id, "seq": 5, "hash": deleted.hash}])
    async with superuser() as conn:
        async with tampering(conn, cut.surviving) as partition:
            await conn.execute(f"DELETE FROM {partition} WHERE session_id = $1 AND seq = 5", cut.session_id)
        await conn.execute("INSERT INTO retention_log (partition_name, range_from, range_to, event_count, "
                           "chain_heads, tenant_windows, dropped_by) VALUES ($1, $2, $3, 1, $4::jsonb, '{}', "
                           "'wakeline_maintenance')", cut.kept, cut.kept_from, cut.kept_to, forged_head)
    report = await cut.verify()
    found = reasons(report)
    assert (5, MISSING.format(5)) in found and report.retained_out == 3
    assert [seq for seq, reason in found if "still in events inside the dropped range" in reason] == [4, 6]


async def test_a_correctly_chained_snapshot_that_lies_about_its_prefix_is_reported_at_its_seq(setup: Setup) -> None:
    """No tampering with the database: a brain (buggy or forged) seals a snapshot whose
    state is not the fold of the events before it. Its chain holds; its content does not."""
    def with_snapshot(lying: bool) -> list[Event]:
        prefix = sealed(setup.tenant, fresh_session_id())
        state = state_to_json(fold(prefix))
        if lying:
            state["messages"] = state["messages"][1:]  # a wake from it would forget what was asked
        snapshot = SnapshotPayload(state=state, state_hash=state_hash(state), format=STATE_FORMAT)
        rest = [draft(snapshot), draft("user_message", text="now?")]
        return prefix + factories.sealed(rest, prefix[0].session_id, tenant=setup.tenant, after=prefix[-1],
                                         stamps=factories.LIVE)

    lying, honest = with_snapshot(lying=True), with_snapshot(lying=False)
    async with service_connection() as conn, conn.transaction():
        await set_tenant(conn, setup.tenant)
        for event in [*lying, *honest]:
            await insert_event(conn, as_row(event))
    report = await setup.verify(lying[0].session_id)
    assert (report.ok, report.first_bad_seq, report.events) == (False, 7, 8)
    assert reasons(report) == [(7, "snapshot disagrees with the fold of its prefix: "
                                   "its state differs from the fold of seq 1..6 in messages")]
    assert (await setup.verify(honest[0].session_id)).ok
