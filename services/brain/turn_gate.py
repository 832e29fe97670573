"""`TurnGate`: the running-sessions quota where a turn starts and ends (issue 34).

The pure steps (`next_step`) know nothing of slots: a session with a turn to start gets
`turn_started`, and a `queued` one (`awaiting_slot`) waits for an input. The gate stands
between them and the log. Before a `turn_started` is sealed it takes one of the tenant's
slots (`TurnSlots.take`, one Postgres statement); without one the session records
`turn_queued` instead, once, and waits `queued`. Every later advance of a queued session (the
wake its grant sends, any input) asks again, and a granted slot starts the turn. Once an
advance leaves the session waiting for an input (idle, ended, deleted), the slot goes back
(`release`), and the sessions granted the room meanwhile are woken through the inbox
(`ActorDeps.wake_sessions`). A session going on by itself from one turn to the next (a tool's
result, then the next model call) keeps its slot: "running" is a session at work, not one
model call.

Nothing else costs a statement: the actor remembers the slot it holds, so the next turns of
a session at work start without asking, unless the deployment shares its sessions at work
(`WAKELINE_RUNNING_SESSIONS_TOTAL`): then `TurnSlots.keep` is asked, which costs a statement only
once a second or so per tenant, or while the tenant holds more than its share; a session of a
tenant over its share gives its slot back there and waits `queued` at the back of its queue.
"""

from __future__ import annotations

import logging

from wakeline.agent.steps import SYSTEM, Step, next_step
from wakeline.contract import events as e
from wakeline.log.chain import Draft
from wakeline.log.state import SessionState, evolve
from wakeline_brain.actor_deps import ActorView

log = logging.getLogger(__name__)


def _starts_turn(step: Step) -> bool:
    return isinstance(step, list) and len(step) == 1 and isinstance(step[0].payload, e.TurnStartedPayload)


def holds_slot(state: SessionState) -> bool:
    """In a turn, or queued for one: what a slot (or a place in the queue) is held for."""
    return state.in_turn or state.awaiting_slot


class TurnGate:
    def __init__(self, actor: ActorView):
        self._actor = actor
        self.took = False  # a slot was granted during the current advance
        # This actor knows it holds the slot: the next turns of a session going on by itself
        # (a tool's result, then the next model call) start without asking, so a tool step
        # costs no statement. Asked again after a wake (another brain may have held it).
        self.held = False

    async def gated(self, state: SessionState, step: Step, asked: bool) -> tuple[Step, bool]:
        """`step` as the quota lets it go: (the step, whether the slots were asked). Asked at
        most once per advance (`asked`): a turn just queued is not asked for again at once."""
        slots = self._actor.deps.turn_slots
        if step is None and state.awaiting_slot:
            if asked:
                return None, asked
            step = next_step(evolve(state, awaiting_slot=False))  # what the grant would let it do
        if not _starts_turn(step):
            return step, asked  # an end (cancelled, a budget) goes as it is, queued or not
        if slots is None:
            return step, asked  # no quota in force (a queued session starts)
        held = self.held
        try:
            if held:  # the slot is ours, unless its tenant is over its share of the deployment
                answer = await slots.keep(self._actor.tenant, self._actor.session_id)
            else:
                answer = await slots.take(self._actor.tenant, self._actor.session_id)
        except Exception as err:  # the quota's bookkeeping never stops a session: it runs uncounted
            log.warning("session %s: no running-session slot could be %s (%s); the turn starts uncounted",
                        self._actor.session_id, "kept" if held else "taken", err)
            return step, asked if held else True
        await self._wake(answer.woken)
        if answer.granted:
            if not held:
                self.took = self.held = True
                return step, True
            return step, asked
        self.held = False  # given back (kept: over its share), or none free (taken)
        if state.awaiting_slot:
            return None, True  # still queued: nothing new to record
        queued = e.TurnQueuedPayload(turn=state.turns + 1, running=answer.running, limit=answer.limit or 1)
        return [Draft(payload=queued, actor=SYSTEM, trust="instruction")], True

    async def settle(self, before: SessionState, after: SessionState) -> None:
        """After a committed advance: the slot (or the queue's place) goes back once the session
        is out of its turn, and the sessions granted the room are woken."""
        took, self.took = self.took, False
        slots = self._actor.deps.turn_slots
        if slots is None or holds_slot(after) or next_step(after) is not None or not (took or holds_slot(before)):
            return  # still in its turn, or going on by itself: the slot stays
        self.held = False
        try:
            woken = await slots.release(self._actor.tenant, self._actor.session_id)
        except Exception as err:  # held until the brain's sweep finds the session out of its turn
            log.warning("session %s: its running-session slot could not be given back (%s); the sweep will",
                        self._actor.session_id, err)
            return
        await self._wake(woken)

    async def _wake(self, sessions: tuple[str, ...]) -> None:
        wake = self._actor.deps.wake_sessions
        if sessions and wake is not None:
            await wake(self._actor.tenant, sessions)  # never raises: a lost wake is the sweep's
