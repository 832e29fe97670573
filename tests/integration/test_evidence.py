"""Evidence that survives a compromised database host (issue 16), against the real Postgres
and the real Kafka broker.

A tenant's chain heads are signed with Ed25519 by a signer whose private key neither the
database nor verify ever holds, and each signed checkpoint is kept three times: a row in
`signed_checkpoints`, a record on `<prefix>.checkpoints`, a line in the file sink. Each
attack below is made as the database superuser, as host root (files) or as the Kafka
admin, without the signer's key, and verify reports it with the seq or the checkpoint it
breaks at. The untouched cases verify clean, so each test can fail both ways.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import RecordsToDelete

from conftest_pg import (
    EVENT_COLUMNS, fresh_month, fresh_session_id, fresh_tenant, insert_event, maintenance_connection,
    require_kafka, require_postgres, service_connection, set_tenant,
)
from tampering import guards_off, superuser
from tests import factories
from tests.e2e.stack import free_port
from tests.factories import Stamps, draft
from wakeline.evidence import witnesses
from wakeline.evidence.heads import Head, stored_heads
from wakeline.storage.event_rows import event_row
from wakeline.contract.events import Event
from wakeline.transport.kafka_io import make_admin, make_consumer
from wakeline.storage.pg import TenantPool
from wakeline.runtime.settings import CommonSettings
from wakeline.evidence.signed_checkpoints import Envelope, new_statement, sign_statement
from wakeline.evidence.anchoring_lag import anchoring_lag, due
from wakeline.evidence.signer import tenants_of
from wakeline.evidence.signing_round import Round, sign_round
from wakeline.evidence.signing import SeedSigner
from wakeline.contract.topics import CHECKPOINTS
from wakeline.evidence.verify import Report, verify_all, verify_session

pytestmark = [pytest.mark.postgres, pytest.mark.kafka]

DRAFTS = [
    draft("session_created", config={}, owner=factories.SPEAKERS.user),
    draft("user_message", text="list the files"),
    draft("model_turn", text="Let me look.", tool_call_ids=["tc-1"]),
    draft("tool_call", tool_call_id="tc-1", name="bash", input={"cmd": "ls"}),
    draft("tool_result", tool_call_id="tc-1", name="bash", output="a.txt\n"),
    draft("model_turn", text="There is one file, a.txt."),
]
MALLORY = SeedSigner(bytes(range(1, 33)))  # a key that is not the signer's
DAY = timedelta(days=1)


def as_row(event: Event) -> dict:
    row = dict(zip(EVENT_COLUMNS, event_row(event)))
    return {**row, "payload": json.loads(row["payload"])}


class Stack:
    """A fresh tenant with one six-event session, the signer's key, its sink, and verify."""

    def __init__(self, pool: TenantPool, settings: CommonSettings, sink: Path, times: Sequence[datetime] = ()) -> None:
        self.pool, self.settings, self.sink = pool, settings, sink
        self.seed = os.urandom(32)
        self.signer = SeedSigner(self.seed)
        self.tenant, self.session_id = fresh_tenant(), fresh_session_id()
        t0 = datetime.now(UTC)
        times = times or [t0 + timedelta(milliseconds=s) for s in range(1, 7)]
        self.events = factories.sealed(DRAFTS, self.session_id, tenant=self.tenant, stamps=factories.at(times))
        self.signed: list[Envelope] = []

    async def insert(self, events: Sequence[Event]) -> None:
        async with service_connection() as conn, conn.transaction():
            await set_tenant(conn, self.tenant)
            for event in events:
                await insert_event(conn, as_row(event))

    async def sign(self, floor: timedelta = DAY) -> Envelope:
        return (await self.sign_round(floor)).envelope

    async def sign_round(self, floor: timedelta = DAY) -> Round:
        done = await sign_round(self.pool, self.signer, self.tenant, self.settings, self.sink, floor=floor)
        self.signed.append(done.envelope)
        return done

    def label(self, n: int) -> str:
        return f"#{n} {self.signed[n - 1].parsed().id}"

    async def evidence(self):
        return await witnesses.gather(self.pool, self.settings, self.sink, self.tenant, self.signer.public_key())

    async def verify(self, *, evidence: bool = True) -> Report:
        found = await self.evidence() if evidence else None
        async with self.pool.transaction(self.tenant) as conn:
            return await verify_session(conn, self.session_id, evidence=found)

    def partition(self, events: Sequence[Event] = ()) -> str:
        ts = (events or self.events)[0].ts
        return f"events_y{ts.year:04d}m{ts.month:02d}"


def reasons(report: Report) -> list[tuple[int | None, str]]:
    return [(p.seq, p.reason) for p in report.problems]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    await require_postgres()
    settings = CommonSettings()
    await require_kafka(settings)
    await witnesses.ensure_topic(settings)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        stack = Stack(pool, settings, tmp_path / "sink")
        await stack.insert(stack.events)
        await stack.sign()
        yield stack


async def test_an_untouched_session_verifies_against_its_signed_checkpoint_in_all_three_witnesses(
        stack: Stack) -> None:
    report = await stack.verify()
    assert (report.ok, report.problems, report.signed_checkpoint, report.evidence_checked) == (True, (), 1, True)
    evidence = await stack.evidence()
    assert evidence.counts == {"postgres": 1, "topic": 1, "sink": 1}
    assert evidence.genuine[0].heads == {stack.session_id: Head(seq=6, hash=stack.events[-1].hash)}


async def test_a_rewritten_byte_is_reported_at_its_seq(stack: Stack) -> None:
    async with superuser() as conn, guards_off(conn, [stack.partition(), "event_keys"]):
        await conn.execute(f"UPDATE {stack.partition()} SET payload = jsonb_set(payload, '{{text}}', '\"list "
                           "the filez\"') WHERE session_id = $1 AND seq = 2", stack.session_id)
    report = await stack.verify()
    assert (report.ok, report.first_bad_seq) == (False, 2)
    assert report.reason.startswith("hash mismatch"), reasons(report)


async def test_a_deleted_row_is_reported_at_its_seq(stack: Stack) -> None:
    async with superuser() as conn, guards_off(conn, [stack.partition(), "event_keys"]):
        await conn.execute(f"DELETE FROM {stack.partition()} WHERE session_id = $1 AND seq = 4", stack.session_id)
        await conn.execute("DELETE FROM event_keys WHERE session_id = $1 AND seq = 4", stack.session_id)
    report = await stack.verify()
    assert (report.ok, report.first_bad_seq, report.reason) == (False, 4, "gap: seq 4 missing from events and "
                                                                          "event_keys")


async def rewrite_consistently(stack: Stack) -> list[Event]:
    """Event 2's text changed and 2..6 re-sealed with the same ids and times: a valid chain."""
    drafts = [*DRAFTS]
    drafts[1] = draft("user_message", text="delete the files")
    original = stack.events
    same = Stamps(ts=lambda seq: original[seq - 1].ts, event_id=lambda session_id, seq: original[seq - 1].event_id)
    resealed = factories.sealed(drafts, stack.session_id, tenant=stack.tenant, stamps=same)
    async with superuser() as conn, guards_off(conn, [stack.partition(), "event_keys"]):
        for event in resealed[1:]:
            await conn.execute(f"UPDATE {stack.partition()} SET payload = $3::jsonb, "
                               "prev_hash = decode($4, 'hex'), hash = decode($5, 'hex') "
                               "WHERE session_id = $1 AND seq = $2", event.session_id, event.seq,
                               event.payload.model_dump_json(), event.prev_hash, event.hash)
            await conn.execute("UPDATE event_keys SET hash = decode($3, 'hex') WHERE session_id = $1 AND seq = $2",
                               event.session_id, event.seq, event.hash)
    return resealed


async def test_a_consistently_rewritten_chain_is_reported_at_the_signed_seq(stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    assert (await stack.verify(evidence=False)).ok  # every hash, link and key agrees: only the signature tells
    report = await stack.verify()
    assert reasons(report) == [(6, f"rewritten since signed checkpoint {stack.label(1)}: hash at seq 6 is "
                                   f"{resealed[-1].hash[:16]}…, the checkpoint signed {stack.events[-1].hash[:16]}…")]


async def sign_what_the_database_says(stack: Stack) -> Envelope:
    """A signer that signs whatever heads the database reports (as the signer once did):
    genuine, with the signer's own key, chained on its newest statement, in all three witnesses."""
    async with stack.pool.transaction(stack.tenant) as conn:
        heads = await stored_heads(conn)
    envelope = new_statement(stack.signer, stack.tenant, heads, previous=stack.signed[-1],
                             created_at=datetime.now(UTC), through=None)
    async with stack.pool.transaction(stack.tenant) as conn:
        await witnesses.insert(conn, envelope, heads)
    await witnesses.publish(stack.settings, envelope)
    witnesses.append_sink(stack.sink, stack.tenant, envelope)
    stack.signed.append(envelope)
    return envelope


async def cut_tail(stack: Stack, after: int) -> None:
    """Every seq past `after` deleted from events and event_keys: a shorter, valid chain."""
    async with superuser() as conn, guards_off(conn, [stack.partition(), "event_keys"]):
        await conn.execute(f"DELETE FROM {stack.partition()} WHERE session_id = $1 AND seq > $2",
                           stack.session_id, after)
        await conn.execute("DELETE FROM event_keys WHERE session_id = $1 AND seq > $2", stack.session_id, after)


async def test_the_signer_refuses_a_consistent_rewrite_and_signs_the_old_head_again(stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    done = await stack.sign_round()
    old = Head(seq=6, hash=stack.events[-1].hash)
    assert [(r.session_id, r.signed, r.found) for r in done.refused_heads] == [
        (stack.session_id, old, Head(seq=6, hash=resealed[-1].hash))]
    evidence = await stack.evidence()
    assert evidence.genuine[-1].heads == {stack.session_id: old}  # the rewrite was never signed
    assert reasons(await stack.verify()) == [
        (6, f"rewritten since signed checkpoint {stack.label(2)}: hash at seq 6 is {resealed[-1].hash[:16]}…, "
            f"the checkpoint signed {stack.events[-1].hash[:16]}…")]


async def test_the_signer_refuses_a_rewrite_that_moved_on_past_the_signed_head(stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    more = factories.sealed([draft("user_message", text="and the backups")], stack.session_id, tenant=stack.tenant,
                            after=resealed[-1], stamps=factories.LIVE)
    await stack.insert(more)  # seq 7 chains onto the rewritten 6: the head moved forward
    done = await stack.sign_round()
    assert [(r.signed.seq, r.found) for r in done.refused_heads] == [(6, Head(seq=7, hash=more[0].hash))]
    assert "holds hash" in done.refused_heads[0].why and "at seq 6" in done.refused_heads[0].why
    # A head that moved on over the chain it signed is signed as before.
    honest = factories.sealed([draft("user_message", text="more")], stack.session_id, tenant=stack.tenant,
                              after=more[-1], stamps=factories.LIVE)
    await stack.insert(honest)
    assert [r.session_id for r in (await stack.sign_round()).refused_heads] == [stack.session_id]


async def test_the_signer_refuses_a_cut_tail_and_verify_reports_the_signed_seq(stack: Stack) -> None:
    await cut_tail(stack, after=4)
    assert (await stack.verify(evidence=False)).ok  # a shorter chain is a valid chain
    done = await stack.sign_round()
    assert [(r.signed.seq, r.found.seq if r.found else None) for r in done.refused_heads] == [(6, 4)]
    assert "went back from seq 6 to seq 4" in done.refused_heads[0].why
    assert reasons(await stack.verify()) == [
        (6, f"rewritten since signed checkpoint {stack.label(2)}: seq 6 it anchored is missing")]


async def test_a_rewrite_signed_by_a_signer_that_signs_what_it_is_told_is_still_reported(stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    await sign_what_the_database_says(stack)  # (6, new hash): the newest statement agrees with the rewrite
    assert reasons(await stack.verify()) == [
        (6, f"rewritten since signed checkpoint {stack.label(1)}: hash at seq 6 is {resealed[-1].hash[:16]}…, "
            f"the checkpoint signed {stack.events[-1].hash[:16]}…"),
        (None, f"checkpoint {stack.label(2)} contradicts checkpoint {stack.label(1)}: session {stack.session_id} "
               f"at seq 6 has hash {resealed[-1].hash[:16]}…, {stack.events[-1].hash[:16]}… was signed: rewritten")]


async def test_a_cut_tail_signed_by_a_signer_that_signs_what_it_is_told_is_still_reported(stack: Stack) -> None:
    await cut_tail(stack, after=4)
    await sign_what_the_database_says(stack)  # (4, hash of 4)
    assert reasons(await stack.verify()) == [
        (6, f"rewritten since signed checkpoint {stack.label(1)}: seq 6 it anchored is missing"),
        (None, f"checkpoint {stack.label(2)} contradicts checkpoint {stack.label(1)}: session {stack.session_id} "
               "went back from seq 6 to seq 4: its tail was cut")]


async def test_heads_rewritten_in_postgres_to_match_a_rewrite_are_reported_against_the_signed_root(
        stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    async with superuser() as conn, guards_off(conn, ["signed_checkpoints"]):
        await conn.execute("UPDATE signed_checkpoints SET heads = $2::jsonb WHERE tenant = $1", stack.tenant,
                           json.dumps({stack.session_id: {"seq": 6, "hash": resealed[-1].hash}}))
    report = await stack.verify()
    assert not report.ok and report.signed_checkpoint is None
    assert (None, f"checkpoint {stack.label(1)}: the heads postgres holds do not hash to its signed root") \
        in reasons(report)


async def test_a_replaced_checkpoint_table_is_refused_and_named_from_the_topic_and_the_sink(stack: Stack) -> None:
    resealed = await rewrite_consistently(stack)
    heads = {stack.session_id: Head(seq=6, hash=resealed[-1].hash)}
    forged = new_statement(MALLORY, stack.tenant, heads, previous=None, created_at=datetime.now(UTC),
                           through=resealed[-1].ts)
    async with superuser() as conn:
        async with guards_off(conn, ["signed_checkpoints"]):
            await conn.execute("DELETE FROM signed_checkpoints WHERE tenant = $1", stack.tenant)
        await conn.execute("SELECT set_config('wakeline.tenant', $1, false)", stack.tenant)
        await witnesses.insert(conn, forged, heads)
    found = reasons(await stack.verify())
    fake = f"#1 {forged.parsed().id}"
    assert (None, f"checkpoint {fake} in the postgres: its signature does not verify (forged or altered)") in found
    assert (None, f"checkpoint {stack.label(1)} is missing from the postgres (present in the topic and the "
                  "sink)") in found


async def test_a_checkpoint_forged_into_all_three_witnesses_without_the_key_is_refused(stack: Stack) -> None:
    forged = sign_statement(MALLORY, new_statement(stack.signer, stack.tenant, {}, previous=stack.signed[0],
                                                   created_at=datetime.now(UTC), through=None).parsed())
    async with superuser() as conn:
        await conn.execute("SELECT set_config('wakeline.tenant', $1, false)", stack.tenant)
        await witnesses.insert(conn, forged, {})
    await witnesses.publish(stack.settings, forged)
    witnesses.append_sink(stack.sink, stack.tenant, forged)
    report = await stack.verify()
    fake = f"#2 {forged.parsed().id}"
    assert [r for s, r in reasons(report)] == [
        f"checkpoint {fake} in the {w}: its signature does not verify (forged or altered)"
        for w in ("postgres", "topic", "sink")]
    assert report.signed_checkpoint == 1  # the genuine one still anchors the chain


async def test_the_signer_never_chains_on_a_row_forged_into_postgres(stack: Stack) -> None:
    forged = sign_statement(MALLORY, new_statement(stack.signer, stack.tenant, {}, previous=stack.signed[0],
                                                   created_at=datetime.now(UTC), through=None).parsed())
    async with superuser() as conn:
        await conn.execute("SELECT set_config('wakeline.tenant', $1, false)", stack.tenant)
        await witnesses.insert(conn, forged, {})
    # Its predecessor is the newest statement its own key signed (#1), so it takes #2, which
    # the forgery holds: the round fails loudly rather than signing "#3 after the forgery".
    with pytest.raises(asyncpg.UniqueViolationError):
        await stack.sign()
    assert await witnesses.ensure_topic(stack.settings) is False  # present: not created again


async def test_a_truncated_file_sink_is_reported_at_the_checkpoints_it_lost(stack: Stack) -> None:
    await stack.sign()
    await stack.sign()
    path = witnesses.sink_path(stack.sink, stack.tenant)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0])  # host root cuts the file after checkpoint 1
    found = [r for _, r in reasons(await stack.verify())]
    assert found == [f"checkpoint {stack.label(n)} is missing from the sink (present in the postgres and the topic)"
                     for n in (2, 3)]
    path.write_text("")
    assert len(reasons(await stack.verify())) == 3


async def test_records_deleted_from_the_topic_are_reported(stack: Stack) -> None:
    await stack.sign()
    partition = TopicPartition(CHECKPOINTS, 0)
    consumer = make_consumer(stack.settings, group_id=None)
    await consumer.start()
    try:
        end = (await consumer.end_offsets([partition]))[partition]
    finally:
        await consumer.stop()
    admin = make_admin(stack.settings)
    await admin.start()
    try:  # the Kafka admin deletes every record up to now, ours included
        await admin.delete_records({partition: RecordsToDelete(before_offset=end)}, timeout_ms=30_000)
    finally:
        await admin.close()
    found = [r for _, r in reasons(await stack.verify())]
    assert found == [f"checkpoint {stack.label(n)} is missing from the topic (present in the postgres and the sink)"
                     for n in (1, 2)]


async def test_a_checkpoint_deleted_from_every_witness_is_named_by_its_successor(stack: Stack) -> None:
    await stack.sign()
    await stack.sign()
    gone = stack.signed[1].parsed().id
    async with superuser() as conn, guards_off(conn, ["signed_checkpoints"]):
        await conn.execute("DELETE FROM signed_checkpoints WHERE id = $1", gone)
    path = witnesses.sink_path(stack.sink, stack.tenant)
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True) if str(gone) not in line))
    # The topic keeps it here; a reader that skips it must still see the gap.
    evidence = await stack.evidence()
    assert f"checkpoint {stack.label(2)} is missing from the postgres and the sink (present in the topic)" in [
        p.reason for p in evidence.problems]
    from wakeline.evidence.cross_check import cross_check
    pg = await _postgres(stack)
    sink, _ = witnesses.read_sink(stack.sink, stack.tenant)
    alone = cross_check(stack.signer.public_key(), stack.tenant, pg, list(sink), list(sink))
    assert [p.reason for p in alone.problems] == [f"checkpoint #2 missing from every witness: checkpoint "
                                                  f"{stack.label(3)} follows it"]


async def _postgres(stack: Stack):
    async with stack.pool.transaction(stack.tenant) as conn:
        return await witnesses.read_postgres(conn)


async def test_verify_all_reports_witness_problems_once_for_the_tenant(stack: Stack) -> None:
    witnesses.sink_path(stack.sink, stack.tenant).write_text("")
    result = await verify_all(stack.pool, stack.tenant, evidence=await stack.evidence())
    assert [r.ok for r in result.sessions] == [True] and not result.ok
    assert [p.reason for p in result.checkpoint_problems] == [
        f"checkpoint {stack.label(1)} is missing from the sink (present in the postgres and the topic)"]


# -- retention cuts ---------------------------------------------------------------------------

@pytest.fixture
async def months(tmp_path: Path) -> AsyncIterator[tuple[Stack, tuple, tuple]]:
    """A session with seqs 1..3 in one far-past month and 4..6 in the next free one; signed once."""
    await require_postgres()
    settings = CommonSettings()
    await require_kafka(settings)
    await witnesses.ensure_topic(settings)
    first = await fresh_month()
    while (second := await fresh_month()) == first:
        pass
    times = [start + DAY + timedelta(minutes=i) for start in (first[1], second[1]) for i in range(3)]
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        stack = Stack(pool, settings, tmp_path / "sink", times)
        await stack.insert(stack.events)
        await stack.sign()
        try:
            yield stack, first, second
        finally:
            async with maintenance_connection() as conn:  # no far-past month is left behind
                for name, _, end in (first, second):
                    if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{name}"):
                        await conn.fetchrow("SELECT * FROM drop_events_partition($1, $2, $3)", name, end + DAY, DAY)


async def test_a_retention_drop_the_signer_anchored_verifies(months) -> None:
    stack, (name, _, end), _ = months
    async with maintenance_connection() as conn:
        await conn.fetchrow("SELECT * FROM drop_events_partition($1, $2, $3)", name, end + DAY, DAY)
    before = await stack.verify()
    assert not before.ok and (3, ) == tuple({s for s, r in reasons(before) if "no signed checkpoint anchors" in r})
    signed = await stack.sign()
    assert [c.seq for c in signed.parsed().cuts] == [3]
    report = await stack.verify()
    assert (report.ok, report.retained_out, report.events, report.signed_checkpoint) == (True, 3, 3, 2), \
        reasons(report)


async def test_a_deleted_month_with_a_forged_retention_log_row_is_reported(months) -> None:
    stack, (name, start, end), _ = months
    head = stack.events[2]
    async with superuser() as conn:  # what retention would do, without retention
        await conn.execute(f"ALTER TABLE events DETACH PARTITION {name}")
        await conn.execute(f"DROP TABLE {name}")
        await conn.execute("INSERT INTO retention_log (partition_name, range_from, range_to, event_count, "
                           "chain_heads, tenant_windows, dropped_by) VALUES ($1, $2, $3, 3, $4::jsonb, '{}', "
                           "'wakeline_maintenance')", name, start, end, json.dumps(
                               [{"tenant": stack.tenant, "session_id": stack.session_id, "seq": 3,
                                 "hash": head.hash}]))
    assert (await stack.verify(evidence=False)).ok  # the blind spot the signed cuts close
    cut = f"retention cut [{start.isoformat()}, {end.isoformat()})"
    unanchored = (3, f"{cut}: no signed checkpoint anchors this cut, so it excuses nothing (a drop the signer "
                     "never signed)")
    report = await stack.verify()
    assert not report.ok and report.first_bad_seq == 1 and unanchored in reasons(report)
    # The month is inside the signer's retention floor (it "survives"): the signer refuses to sign it.
    floor = datetime.now(UTC) - end + 30 * DAY
    refused = await stack.sign(floor=floor)
    assert refused.parsed().cuts == ()
    again = await stack.verify()
    assert unanchored in reasons(again) and [s for s, r in reasons(again) if r.startswith("missing")] == [1, 2, 3]


# -- proofs, lag, schedule ---------------------------------------------------------------------

async def _cli(*args: str, env: dict[str, str], stdin: bytes | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", *args, env=env, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    return proc.returncode, out.decode() + err.decode()


async def test_an_inclusion_proof_from_the_cli_verifies_offline_with_the_public_key_alone(
        stack: Stack, tmp_path: Path) -> None:
    env = {**os.environ, "WAKELINE_EVIDENCE_PUBLIC_KEY": stack.signer.public_key().hex(),
           "WAKELINE_EVIDENCE_KEY_FINGERPRINT": stack.signer.key_id, "WAKELINE_SIGNER_SINK_DIR": str(stack.sink),
           "WAKELINE_CHECKPOINT_KEY_FILE": str(tmp_path / "no-hmac-key")}
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant, "--proof", env=env)
    assert code == 0, out
    proof = [line for line in out.splitlines() if line.startswith('{"session_id"') and '"path"' in line][-1]
    # Offline: no database, no broker, nothing of the stack but the public key.
    bare = {"PATH": os.environ["PATH"], "WAKELINE_POSTGRES_DSN": "postgresql://nobody@127.0.0.1:1/none",
            "WAKELINE_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    key = stack.signer.public_key().hex()
    code, out = await _cli("wakeline.evidence.proofs", "check", "-", "--public-key", key, env=bare,
                           stdin=proof.encode())
    assert code == 0 and out.startswith(f"OK: session {stack.session_id} at seq 6 is in checkpoint #1"), out
    code, out = await _cli("wakeline.evidence.proofs", "check", "-", "--public-key", MALLORY.public_key().hex(),
                           env=bare, stdin=proof.encode())
    assert code == 1 and "signature does not verify" in out
    tampered = proof.replace(stack.events[-1].hash, "0" * 64)
    code, out = await _cli("wakeline.evidence.proofs", "check", "-", "--public-key", key, env=bare,
                           stdin=tampered.encode())
    assert code == 1 and "the head and path lead to root" in out
    # A pinned fingerprint refuses any other public key before anything is read.
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant,
                           env={**env, "WAKELINE_EVIDENCE_PUBLIC_KEY": MALLORY.public_key().hex()})
    assert code == 2 and "is not the pinned" in out


async def test_verify_refuses_to_run_when_host_root_deletes_or_swaps_the_public_key_file(
        stack: Stack, tmp_path: Path) -> None:
    public = tmp_path / "signer.key.pub"
    public.write_text(stack.signer.public_key().hex() + "\n")
    env = {**os.environ, "WAKELINE_EVIDENCE_PUBLIC_KEY_FILE": str(public), "WAKELINE_SIGNER_SINK_DIR": str(stack.sink),
           "WAKELINE_CHECKPOINT_KEY_FILE": str(tmp_path / "no-hmac-key")}
    env.pop("WAKELINE_EVIDENCE_PUBLIC_KEY", None)
    env.pop("WAKELINE_EVIDENCE_KEY_FINGERPRINT", None)
    pinned = {**env, "WAKELINE_EVIDENCE_KEY_FINGERPRINT": stack.signer.key_id}
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant, env=pinned)
    assert code == 0, out
    # Swapped for a key of host root's own: a pin refuses it before anything is read ...
    public.write_text(MALLORY.public_key().hex() + "\n")
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant, env=pinned)
    assert code == 2 and "is not the pinned" in out, out
    # ... and without a pin every genuine statement fails under it, in each witness: never a pass.
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant, env=env)
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert code == 1 and report["signed_checkpoint"] is None, out
    assert [p["reason"] for p in report["problems"]] == [
        f"checkpoint {stack.label(1)} in the {w}: its signature does not verify (forged or altered)"
        for w in ("postgres", "topic", "sink")]
    assert "not pinned" in out
    # Deleted: an error with the reason, not a verify on the chains alone that passes.
    public.unlink()
    for run_env in (env, pinned):
        code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant, env=run_env)
        assert code == 2 and '"ok"' not in out, out
        assert "no public key" in out or "a key fingerprint is pinned but there is no public key" in out, out
    code, out = await _cli("wakeline.evidence.verify", stack.session_id, "--tenant", stack.tenant,
                           "--without-signed-checkpoints", env=env)
    assert code == 0 and "signed checkpoints, their witnesses and signed retention cuts NOT checked" in out, out


async def test_a_deleted_tail_is_reported_on_the_ed25519_path_with_no_hmac_checkpoint(stack: Stack) -> None:
    await cut_tail(stack, after=3)
    report = await stack.verify()
    assert report.signatures_checked is False and report.checkpoint_id is None  # no HMAC key, no HMAC checkpoint
    assert (report.ok, report.first_bad_seq, report.signed_checkpoint) == (False, 6, 1)
    assert reasons(report) == [(6, f"rewritten since signed checkpoint {stack.label(1)}: seq 6 it anchored is "
                                   "missing")]


async def test_the_lag_counts_the_events_no_checkpoint_covers_yet(stack: Stack) -> None:
    nothing = await anchoring_lag(stack.pool, fresh_tenant())
    assert (nothing.unanchored_events, nothing.lag_s, nothing.newest_checkpoint) == (0, 0.0, None)
    lag = await anchoring_lag(stack.pool, stack.tenant)
    assert (lag.unanchored_events, lag.lag_s, lag.newest_checkpoint) == (0, 0.0, 1)
    later = factories.sealed([draft("user_message", text=f"more {i}") for i in range(4)], stack.session_id,
                             tenant=stack.tenant, after=stack.events[-1],
                             stamps=factories.at([stack.events[-1].ts + timedelta(seconds=i + 1) for i in range(4)],
                                                 after=stack.events[-1]))
    await stack.insert(later)
    lag = await anchoring_lag(stack.pool, stack.tenant)
    assert (lag.unanchored_events, lag.lag_s) == (4, (later[-1].ts - stack.events[-1].ts).total_seconds())
    now = datetime.now(UTC)
    assert due(lag, now, every_s=3600, every_events=4) and not due(lag, now, every_s=3600, every_events=5)
    assert due(lag, now + timedelta(hours=2), every_s=3600, every_events=5)
    await stack.sign()
    assert (await anchoring_lag(stack.pool, stack.tenant)).unanchored_events == 0


async def scrape(port: int, tenant: str) -> dict[str, float]:
    """The signer's samples for `tenant` (name -> value), and its unlabelled-by-tenant ones by name{labels}."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
    found = {}
    for line in text.splitlines():
        if not line.startswith("wakeline_signer_"):
            continue
        name, value = line.rsplit(" ", 1)
        if f'tenant="{tenant}"' in name:
            name = name.split("{", 1)[0]
        elif "tenant=" in name:
            continue
        found[name] = float(value)
    return found


async def test_the_signer_run_mode_checkpoints_a_tenant_after_m_events(stack: Stack, tmp_path: Path) -> None:
    key = tmp_path / "signer.key"
    key.write_text(stack.seed.hex())  # the key that signed #1: the run continues its chain
    port = free_port()
    env = {**os.environ, "WAKELINE_SIGNER_KEY_FILE": str(key), "WAKELINE_SIGNER_SINK_DIR": str(stack.sink),
           "WAKELINE_SIGNER_EVERY_S": "3600", "WAKELINE_SIGNER_EVERY_EVENTS": "3", "WAKELINE_SIGNER_POLL_S": "0.2",
           "WAKELINE_METRICS_PORT": str(port)}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "wakeline.evidence.signer", "run", "--tenant",
                                                stack.tenant, env=env, stdout=asyncio.subprocess.PIPE)
    try:
        # Its metrics endpoint is up before it says it started.
        started = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        assert (started["signer"], started["tenants"]) == ("started", [stack.tenant])
        more = factories.sealed([draft("user_message", text=f"more {i}") for i in range(2)], stack.session_id,
                                tenant=stack.tenant, after=stack.events[-1], stamps=factories.LIVE)
        await stack.insert(more)  # 2 < 3: not due
        lagging: dict[str, float] = {}
        for _ in range(300):  # until a poll has seen them (every 0.2 s), at most a minute
            lagging = await scrape(port, stack.tenant)  # the operator's number: 2 events not anchored
            if lagging.get("wakeline_signer_unanchored_events") == 2.0:
                break
            await asyncio.sleep(0.2)
        assert lagging["wakeline_signer_unanchored_events"] == 2.0, lagging
        assert lagging["wakeline_signer_lag_seconds"] == (more[-1].ts - stack.events[-1].ts).total_seconds()
        async with stack.pool.transaction(stack.tenant) as conn:
            assert await conn.fetchval("SELECT count(*) FROM signed_checkpoints") == 1
        third = factories.sealed([draft("user_message", text="third")], stack.session_id, tenant=stack.tenant,
                                 after=more[-1], stamps=factories.LIVE)
        await stack.insert(third)
        line = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        assert (line["tenant"], line["checkpoint"], line["sessions"]) == (stack.tenant, 2, 1)
        anchored = await scrape(port, stack.tenant)
        assert (anchored["wakeline_signer_unanchored_events"], anchored["wakeline_signer_lag_seconds"]) == (0.0, 0.0)
        assert anchored['wakeline_signer_rounds_total{outcome="signed"}'] == 1.0
    finally:
        proc.terminate()
        await proc.wait()


async def test_the_signer_finds_every_tenant_with_events_and_the_lookup_widens_nothing(stack: Stack) -> None:
    found = await tenants_of(stack.pool, [])
    assert stack.tenant in found and found == sorted(set(found))
    assert await tenants_of(stack.pool, ["named"]) == ["named"]
    async with stack.pool.system_transaction() as conn:  # the service role, no tenant set
        await conn.fetch("SELECT event_tenants()")
        assert await conn.fetchval("SELECT count(*) FROM event_keys") == 0
