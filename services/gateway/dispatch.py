"""Sending a command and waiting (bounded) for the event that answers it.

The brain answers every command it sequences with an event whose `causation_id` is the
command id: the effect (`user_message`, `approval_granted`, ...) or `input_rejected`. The
gateway polls Postgres for that event; when the wait runs out it says the command is
pending rather than guessing. A rejection becomes an HTTP error naming the brain's reason.
"""

from __future__ import annotations

import asyncio

from aiokafka.errors import KafkaError

from wakeline.commands import CommandBase
from wakeline.events import EventBase
from wakeline_gateway.errors import ApiError
from wakeline_gateway.inbox import Inbox
from wakeline_gateway.shapes import CommandPublic
from wakeline_gateway.store import SessionStore

PENDING_NOTE = ("the command is on wakeline.inbox but no outcome was recorded within {:g} s; "
                "GET /v1/sessions/{}/events shows it when the brain has sequenced it")


def rejection_status(reason: str) -> int:
    """The HTTP status for a brain's `input_rejected` reason."""
    if reason.startswith("conflict"):
        return 409
    if "deleted" in reason or "another tenant" in reason:
        return 404
    if "already" in reason or "not awaiting" in reason or "not pending" in reason:
        return 409
    return 422


def describe(command: CommandBase, event: EventBase | None, wait_s: float) -> CommandPublic:
    """What to tell the caller about a command that was accepted (or is still pending)."""
    if event is None:
        return CommandPublic(session_id=command.session_id, command_id=command.command_id,
                             status="pending", note=PENDING_NOTE.format(wait_s, command.session_id))
    queued = event.type == "message_queued" if event.type in ("message_queued", "user_message") else None
    return CommandPublic(session_id=command.session_id, command_id=command.command_id, status="done",
                         outcome=event.type, seq=event.seq, queued=queued)


class CommandDispatcher:
    def __init__(self, inbox: Inbox, store: SessionStore, wait_s: float, poll_s: float):
        self._inbox, self._store = inbox, store
        self._wait_s, self._poll_s = wait_s, poll_s

    async def dispatch(self, command: CommandBase, wait: bool = True) -> CommandPublic:
        """Sends the command unless its outcome is already recorded (a retry); raises on rejection."""
        outcome = await self._store.outcome(command.tenant, command.session_id, command.command_id)
        if outcome is None:
            await self._submit(command)
            if wait:
                outcome = await self.await_outcome(command)
        if outcome is not None and outcome.type == "input_rejected":
            await self._raise_rejection(command, outcome)
        return describe(command, outcome, self._wait_s)

    async def await_outcome(self, command: CommandBase) -> EventBase | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait_s
        while True:
            event = await self._store.outcome(command.tenant, command.session_id, command.command_id)
            remaining = deadline - loop.time()
            if event is not None or remaining <= 0:
                return event
            await asyncio.sleep(min(self._poll_s, remaining))

    async def _submit(self, command: CommandBase) -> None:
        try:
            await self._inbox.submit(command)
        except KafkaError as err:
            raise ApiError(503, f"could not put the command on wakeline.inbox: {type(err).__name__}: {err}",
                           command_id=command.command_id) from err

    async def _raise_rejection(self, command: CommandBase, event: EventBase) -> None:
        reason = event.payload.reason  # type: ignore[attr-defined]
        status = rejection_status(reason)
        extra: dict[str, object] = {"command_id": command.command_id, "seq": event.seq}
        if reason.startswith("conflict"):
            # The rejection is itself an event, so the session has moved past it: a retry
            # must use the seq as it is now, never the one the brain compared against.
            extra.update(expected_seq=event.payload.expected_seq,  # type: ignore[attr-defined]
                         current_seq=await self._store.last_seq(command.tenant, command.session_id))
        raise ApiError(status, f"the brain rejected the command: {reason}", **extra)
