"""`SessionLog`: a session's log as its actor writes it.

It holds the committed `state` and seals drafts after it (the next seq, the hash chain, a
time and an id from the deps). `write` sends sealed events, the tool calls they make
issuable (`tool_calls.call_records`) and, every `snapshot_every` events, a snapshot, in one
transaction of the partition's writer, and moves `state` only once that committed: a
refused append leaves the session where it was and issues nothing. Nothing here decides
what to record; `on_sealed` hears of every event sealed (the compaction counts read the
model's usage there) and `on_written` of every state committed (the harness's timers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from wakeline.contract import events as e
from wakeline.contract.codec import encode
from wakeline.contract.limits import check_record
from wakeline.contract.topics import ARCHIVE_NOW_HEADER, ARCHIVE_NOW_TYPES, EVENTS, record_key
from wakeline.log.chain import Draft, seal
from wakeline.log.fold import apply
from wakeline.log.snapshots import snapshot_payload
from wakeline.log.state import SessionState
from wakeline.runtime import tracing
from wakeline_brain.actor_deps import ActorView
from wakeline_brain.tool_calls import call_records
from wakeline_brain.writer import Record, WriterClosed

log = logging.getLogger(__name__)


def sealed_event(actor: ActorView, draft: Draft, state: SessionState) -> e.Event:
    """`draft` as the event after `state`."""
    return seal(draft, session_id=actor.session_id, tenant=actor.tenant, seq=state.last_seq + 1,
                prev_hash=state.last_hash, ts=actor.deps.now(), event_id=actor.deps.new_id())


class SessionLog:
    def __init__(self, actor: ActorView, on_sealed: Callable[[e.Event], None],
                 on_written: Callable[[SessionState], None]):
        self._actor = actor
        self._on_sealed, self._on_written = on_sealed, on_written
        self.state = SessionState()
        self._issued: set[str] = set()
        self._snapshot_seq = 0  # the newest snapshot's seq, or where one was too large to write
        self._snapshot_refused = False

    def woke(self, state: SessionState, events: list[e.Event]) -> None:
        """The state a wake folded from `events` (the log from its newest snapshot on)."""
        self.state = state
        self._snapshot_seq = max((ev.seq for ev in events if isinstance(ev, e.SnapshotTaken)), default=0)

    async def append(self, drafts: list[Draft], snapshot: bool = False) -> None:
        state, events = self.sealed(drafts, self.state)
        await self.write(events, state, snapshot=snapshot)

    def sealed(self, drafts: list[Draft], state: SessionState) -> tuple[SessionState, list[e.Event]]:
        """`drafts` sealed after `state`, and the state they leave; nothing is written."""
        events = []
        for draft in drafts:
            event = sealed_event(self._actor, draft, state)
            state = apply(state, event)
            events.append(event)
            self._on_sealed(event)
        return state, events

    async def write(self, events: list[e.Event], state: SessionState, snapshot: bool = False) -> None:
        """Writes `events` (sealed after `self.state`, leaving `state`) with the tool calls
        they make issuable, in one transaction; `self.state` moves only once it committed."""
        if not events and not snapshot:
            return
        records = []
        for event in events:
            value = encode(event)
            check_record(value, self._actor.deps.max_record_bytes, f"the {event.type} event at seq {event.seq}")
            records.append(Record(EVENTS, record_key(self._actor.session_id), value, headers=_headers(event)))
        calls = call_records(self._actor, state, self._issued)  # caused by the events, not by the snapshot after them
        snapshot_seq = self._snapshot_seq
        if snapshot or state.last_seq - snapshot_seq >= self._actor.deps.snapshot_every:
            state, snapshot_seq = self._snapshot(state, records)
        await self._actor.writer.append(records + list(calls.values()))
        self._issued.update(calls)  # only once sent: a refused append issues nothing
        self.state, self._snapshot_seq = state, snapshot_seq
        self._on_written(state)

    def _snapshot(self, state: SessionState, records: list[Record]) -> tuple[SessionState, int]:
        """Adds a snapshot of `state` to `records`, in the same transaction as the events
        before it. One over the record limit is not written (a wake then folds the whole
        log: slower, never wrong), and not tried again for another `snapshot_every` events."""
        draft = Draft(payload=snapshot_payload(state), actor="system:brain", trust="instruction")
        event = sealed_event(self._actor, draft, state)
        value = encode(event)
        if len(value) > self._actor.deps.max_record_bytes:
            if not self._snapshot_refused:
                log.warning("session %s: a snapshot at seq %d is %d bytes, over max_record_bytes; "
                            "its wakes fold the whole log", self._actor.session_id, event.seq, len(value))
                self._snapshot_refused = True
            return state, state.last_seq
        records.append(Record(EVENTS, record_key(self._actor.session_id), value))
        return apply(state, event), event.seq

    async def snapshot_on_evict(self) -> None:
        """The next wake starts from here; a short tail since the last snapshot is not worth one."""
        if self.state.last_seq - self._snapshot_seq < self._actor.deps.snapshot_on_evict_after:
            return
        try:
            await self.append([], snapshot=True)
        except WriterClosed:
            raise
        except Exception:  # the log is whole without it: eviction goes on
            log.exception("session %s: the snapshot on eviction failed", self._actor.session_id)


def _headers(event: e.Event) -> list[tuple[str, bytes]] | None:
    """None: the writer adds the appender's trace context. An event a caller waits to read
    back from the archive also asks the archiver to store it at once (`ARCHIVE_NOW_HEADER`)."""
    if event.type not in ARCHIVE_NOW_TYPES:
        return None
    return [*(tracing.headers() or []), (ARCHIVE_NOW_HEADER, b"1")]
