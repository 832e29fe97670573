"""A tenant's rate quotas hold for commands any Kafka client produces straight to the inbox,
counted by the brain in the same Postgres counters the gateway counts in: over its quota a
command is recorded `input_rejected` `quota_exceeded` in its session (a create: dead-lettered
only, no session made), never dropped; another tenant's commands in the same burst are all
handled; and what the gateway already counted is not counted again."""

from __future__ import annotations

import asyncio
import math
import uuid

import httpx
import pytest

from tests.e2e.sessions import create_session, wait_ended, wait_for
from tests.e2e.stored_log import pg_rows
from wakeline.contract import commands as c
from wakeline.contract.codec import encode
from wakeline.contract.topics import INBOX, partition_for, record_key
from wakeline.runtime.settings import CommonSettings
from wakeline.transport.kafka_io import make_producer

RUN = uuid.uuid4().hex[:8]
OUTCOMES = ("SELECT causation_id, type, payload->>'code' AS code, ts FROM events "
            "WHERE session_id = ANY($1::text[]) AND causation_id = ANY($2::text[])")
LETTERS = ("SELECT value::jsonb->>'command_id' AS command_id, reason FROM dead_letters "
           "WHERE service = 'brain' AND reason LIKE 'quota_exceeded:%' AND value::jsonb->>'tenant' = $1")


def client_of(stack, tenant: str, role: str = "user") -> httpx.Client:
    key = stack.api_key(f"{role}-{RUN}", role, tenant)
    return httpx.Client(base_url=stack.url, timeout=30, headers={"Authorization": f"Bearer {key}"})


def set_quotas(stack, tenant: str, **quotas: int) -> None:
    with client_of(stack, tenant, "admin") as admin:
        answer = admin.put("/v1/quotas", json=quotas)
        assert answer.status_code == 200, answer.text


def produce(commands: list[c.CommandBase]) -> None:
    """Straight onto the inbox, as any Kafka client may, all at once: no header but the trace."""
    async def send() -> None:
        settings = CommonSettings()
        producer = make_producer(settings)
        await producer.start()
        try:
            sent = [await producer.send(INBOX, encode(cmd), key=record_key(cmd.session_id),
                                        partition=partition_for(cmd.session_id, settings.partitions))
                    for cmd in commands]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
    asyncio.run(send())


def post(tenant: str, session_id: str) -> c.PostMessage:
    return c.PostMessage(command_id=str(uuid.uuid4()), session_id=session_id, tenant=tenant,
                         actor="user:kafka", text="and one more thing")


def outcomes(stack, tenant: str, sessions: list[str], commands: list[c.CommandBase]) -> dict[str, list]:
    """Each command's outcome events, once every command has one (the brain answers each)."""
    ids = [cmd.command_id for cmd in commands]

    def read() -> dict[str, list] | None:
        found: dict[str, list] = {}
        for row in pg_rows(OUTCOMES, sessions, ids, tenant=tenant):
            found.setdefault(row["causation_id"], []).append(row)
        return found if len(found) == len(ids) else None
    return wait_for(read, 90, f"an outcome for each of {len(ids)} commands of {tenant}", stack)


def letters(stack, tenant: str, count: int) -> dict[str, str]:
    def read() -> dict[str, str] | None:
        found = {row["command_id"]: row["reason"] for row in pg_rows(LETTERS, tenant)}
        return found if len(found) >= count else None
    return wait_for(read, 60, f"{count} quota dead letters of {tenant}", stack)


@pytest.fixture(scope="module")
def tenants(stack):
    """A flooding tenant allowed 2 commands a second, and a calm one at the defaults, each with
    three sessions made over HTTP (counted by the gateway) and ended."""
    flood, calm = f"e2e-kq-flood-{RUN}", f"e2e-kq-calm-{RUN}"
    made = {}
    for tenant in (flood, calm):
        with client_of(stack, tenant) as user:
            made[tenant] = [create_session(user, "say") for _ in range(3)]
            for sid in made[tenant]:
                wait_ended(user, stack, sid)
    set_quotas(stack, flood, commands_per_second=2)
    return flood, calm, made


def test_a_kafka_flood_over_quota_is_rejected_in_its_sessions_and_none_is_lost_nor_another_tenants(stack, tenants):
    flood, calm, made = tenants
    flooded = [post(flood, made[flood][i % 3]) for i in range(40)]
    steady = [post(calm, made[calm][i % 3]) for i in range(10)]
    produce([cmd for pair in zip(flooded, steady + [None] * 30) for cmd in pair if cmd is not None])

    got = outcomes(stack, flood, made[flood], flooded)
    rejected = {cid for cid, rows in got.items() if any(r["code"] == "quota_exceeded" for r in rows)}
    handled = {cid for cid, rows in got.items() if {r["type"] for r in rows} & {"user_message", "message_queued"}}
    assert not rejected & handled and len(rejected) + len(handled) == len(flooded), got
    assert rejected and handled
    # At most the quota in any second, by the brain's own clock: the sliding window's bound.
    stamps = sorted(r["ts"] for rows in got.values() for r in rows)
    span_s = (stamps[-1] - stamps[0]).total_seconds()
    assert len(handled) <= 2 * (math.ceil(span_s) + 1), (len(handled), span_s)
    # Each refusal is also a dead letter saying why, naming the quota and its limit.
    reasons = letters(stack, flood, len(rejected))
    assert set(reasons) == rejected
    assert all("over its quota of 2 commands per second" in r for r in reasons.values())

    calm_got = outcomes(stack, calm, made[calm], steady)
    assert not [r for rows in calm_got.values() for r in rows if r["type"] == "input_rejected"], calm_got


def test_a_kafka_create_over_quota_makes_no_session_and_is_dead_lettered_saying_so(stack):
    tenant = f"e2e-kq-creates-{RUN}"
    set_quotas(stack, tenant, sessions_per_minute=2)
    creates = [c.CreateSession(command_id=str(uuid.uuid4()), session_id=str(uuid.uuid4()), tenant=tenant,
                               actor="user:kafka", message="hi", config={"model": "scripted:say"}) for _ in range(6)]
    produce(creates)

    def settled() -> tuple[set[str], dict[str, str]] | None:
        sessions = {r["session_id"] for r in pg_rows("SELECT session_id FROM sessions WHERE session_id = ANY($1)",
                                                    [cmd.session_id for cmd in creates], tenant=tenant)}
        refused = {r["command_id"]: r["reason"] for r in pg_rows(LETTERS, tenant)}
        return (sessions, refused) if len(sessions) + len(refused) >= len(creates) else None
    sessions, refused = wait_for(settled, 90, "every create made a session or a dead letter", stack)
    by_command = {cmd.command_id: cmd.session_id for cmd in creates}
    assert not sessions & {by_command[cid] for cid in refused}
    assert len(sessions) + len(refused) == len(creates)
    assert 1 <= len(sessions) <= 3  # 2 a minute; 3 if a minute's edge fell inside the burst
    assert all("over its quota of 2 sessions per minute; the session was not created" in r for r in refused.values())


def test_commands_the_gateway_admitted_are_not_counted_again_by_the_brain(stack):
    tenant = f"e2e-kq-http-{RUN}"
    with client_of(stack, tenant) as user:
        sid = create_session(user, "say")
        wait_ended(user, stack, sid)
        # Room for the four and the create's unit, which may still weigh: counted twice (eight), they would not fit.
        set_quotas(stack, tenant, commands_per_second=6)
        # A window after the create's: the count read below is the messages' alone.
        since = pg_rows("SELECT date_trunc('second', now()) + interval '1 second' AS s", tenant=tenant)[0]["s"]
        wait_for(lambda: pg_rows("SELECT now() >= $1 AS ok", since, tenant=tenant)[0]["ok"], 5, "the next second")
        answers = [user.post(f"/v1/sessions/{sid}/messages", params={"wait": "false"}, json={"text": "more"})
                   for _ in range(4)]
    assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
    ids = [a.json()["command_id"] for a in answers]

    def handled() -> list | None:
        rows = pg_rows(OUTCOMES, [sid], ids, tenant=tenant)
        return rows if len({r["causation_id"] for r in rows}) == len(ids) else None
    rows = wait_for(handled, 60, "the four messages' outcomes", stack)
    # Counted twice, the brain would find the gateway's four filling the quota and refuse them.
    assert not [r for r in rows if r["type"] == "input_rejected"], rows
    counted = pg_rows("SELECT coalesce(sum(n), 0) AS n FROM quota_counters WHERE quota = 'commands_per_second' "
                      "AND window_start >= $1", since, tenant=tenant)[0]["n"]
    assert 1 <= counted <= 4, counted  # the gateway's count, once (twice would be up to 8)
