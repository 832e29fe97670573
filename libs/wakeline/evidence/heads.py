"""Each session's chain head as the store holds it now: what both kinds of checkpoint sign.

`Head` is a session's last seq and its hash. `stored_heads` reads them for the tenant set
on the connection (one index probe per session); `held_at` reads the hash at a seq signed
before, for the signer's continuation rule (signed_checkpoints.guard_heads), and
`newest_event_at` the time the heads cover. Signing and storing checkpoints is not here.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from wakeline.contract.events import Frozen


class Head(Frozen):
    seq: int
    hash: str


# The tenant's sessions (session_keys, 0020: one row per session), each with its highest
# registered seq and that key's ts: one backward probe of event_keys' primary key per
# session, instead of reading every event. The tenant test repeats RLS's so the planner can
# use session_keys' leading column.
_KEY_HEADS = """
WITH k AS (
  SELECT s.session_id, h.seq, h.ts FROM session_keys s CROSS JOIN LATERAL (
    SELECT seq, ts FROM event_keys WHERE session_id = s.session_id ORDER BY seq DESC LIMIT 1) AS h
   WHERE s.tenant = current_setting('wakeline.tenant', true))
"""

# The head is the events row, as it always was: event_keys keeps the rows retention dropped
# (tombstones, 0004), events does not. So the registered head is looked up in events (by its
# ts: one partition); when retention dropped it, the session's last event still in events
# is its head (the fallback probes every partition, but only for such sessions), and a
# session with no event left has none, as before. Reading events also keeps its RLS
# (wakeline.viewer, 0006) in force. Only the hash of a row events holds is ever signed.
STORED_HEADS = _KEY_HEADS + """
SELECT k.session_id, coalesce(e.seq, f.seq) AS seq, encode(coalesce(e.hash, f.hash), 'hex') AS hash
  FROM k
  LEFT JOIN LATERAL (SELECT seq, hash FROM events
                      WHERE session_id = k.session_id AND seq = k.seq AND ts = k.ts) AS e ON true
  LEFT JOIN LATERAL (SELECT seq, hash FROM events WHERE e.seq IS NULL AND session_id = k.session_id
                      ORDER BY seq DESC LIMIT 1) AS f ON true
 WHERE coalesce(e.seq, f.seq) IS NOT NULL
"""

# What STORED_HEADS replaced (it reads every event of the tenant); kept for the test that
# holds the two equal and for the benchmark's before/after.
STORED_HEADS_BY_SCAN = ("SELECT DISTINCT ON (session_id) session_id, seq, encode(hash, 'hex') AS hash FROM events "
                        "ORDER BY session_id, seq DESC")


async def stored_heads(conn: asyncpg.Connection, *, query: str = STORED_HEADS) -> dict[str, Head]:
    """Each session's last stored event (seq, hash), for the tenant set on `conn` (in a transaction)."""
    # The plan is index probes only, but at 20k sessions its estimate passes jit_above_cost,
    # and compiling it for every partition of events took 4.6 s of a 5.3 s round (EXPLAIN
    # ANALYZE at 1M events); without JIT the round is ~0.5 s. Local to the transaction.
    await conn.execute("SELECT set_config('jit', 'off', true)")
    rows = await conn.fetch(query)
    return {r["session_id"]: Head(seq=r["seq"], hash=r["hash"]) for r in rows}


async def newest_event_at(conn: asyncpg.Connection) -> datetime | None:
    """The time of the tenant's newest stored event (None: it has none): what a signed
    statement says its heads cover (`through`)."""
    value: datetime | None = await conn.fetchval("SELECT max(ts) FROM events")
    return value


# What the store holds now at each (session, seq) given: the events row where it still is,
# else event_keys' tombstone (retention dropped the row, not its registered hash). One
# statement for every session whose head moved, each a primary-key probe of event_keys and
# one of the event's own partition (by its ts).
_HELD_AT = """
SELECT s.session_id, encode(coalesce(e.hash, k.hash), 'hex') AS hash
  FROM unnest($1::text[], $2::bigint[]) AS s(session_id, seq)
  LEFT JOIN event_keys k ON k.session_id = s.session_id AND k.seq = s.seq
  LEFT JOIN LATERAL (SELECT hash FROM events
                      WHERE session_id = s.session_id AND seq = s.seq AND ts = k.ts) AS e ON true
"""


async def held_at(conn: asyncpg.Connection, signed: dict[str, Head],
                  found: dict[str, Head]) -> dict[str, str | None]:
    """For each session whose head in `found` moved past the one `signed`, the hash the store
    holds now at the signed seq (None: nothing there)."""
    moved = sorted((s, h.seq) for s, h in signed.items() if s in found and found[s].seq > h.seq)
    if not moved:
        return {}
    rows = await conn.fetch(_HELD_AT, [s for s, _ in moved], [q for _, q in moved])
    return {r["session_id"]: r["hash"] for r in rows}
