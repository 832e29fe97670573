"""Sending a command and waiting (bounded) for the event that answers it.

The brain answers every command it sequences with an event whose `causation_id` is the
command id: the effect (`user_message`, `approval_granted`, ...) or `input_rejected`. The
gateway hears that event on its events feed (`feed.py`) as soon as the brain commits it,
registering before it sends so nothing slips between; Postgres is the fallback, checked
every `recheck_s` while the feed runs and every `poll_s` when it does not, and once more at
the deadline, so a feed gap delays an answer but never loses it. A command that changes
what reads see (create, delete) also waits until its outcome is archived, so the next read
agrees with the answer. When the wait runs out the gateway says the command is pending
rather than guessing. A rejection becomes an HTTP error whose status comes from
the rejection's `code` (REJECTION_STATUS) and whose body carries that code unchanged.
Right before a new command is sent, the tenant's rate quotas admit it or refuse it with a
429 (`quotas/gate.py`); a retry whose outcome is recorded sends nothing and counts nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from pydantic import BaseModel

from wakeline.contract.commands import CommandBase
from wakeline.contract.events import BudgetChanged, Event, InputRejected, MessageQueued, UserMessageReceived
from wakeline.contract.limits import RecordTooLarge, encoded_size
from wakeline.contract.topics import INBOX
from wakeline_gateway.admission import admit, admit_command
from wakeline_gateway.errors import ApiError
from wakeline_gateway.idempotency import key_id_of, keyed
from wakeline_gateway.inbox import Inbox
from wakeline_gateway.listeners import Listeners
from wakeline_gateway.quotas.gate import Admission, AdmitAll
from wakeline_gateway.rejections import rejection_code, rejection_status
from wakeline_gateway.shapes.commands import CommandPublic
from wakeline_gateway.read_model.sessions import SessionStore

PENDING_NOTE = ("the command is on " + INBOX + " but no outcome was recorded within {:g} s; "
                "GET /v1/sessions/{}/events shows it when the brain has sequenced it")


def describe(command: CommandBase, event: Event | None, wait_s: float) -> CommandPublic:
    """What to tell the caller about a command that was accepted (or is still pending)."""
    if event is None:
        return CommandPublic(session_id=command.session_id, command_id=command.command_id,
                             status="pending", note=PENDING_NOTE.format(wait_s, command.session_id))
    note = None
    match event:
        case MessageQueued():
            queued: bool | None = True
        case UserMessageReceived():
            queued = False
        case BudgetChanged():
            queued, note = None, f"budget set; the message is recorded with it, at seq {event.seq + 1}"
        case _:
            queued = None
    return CommandPublic(session_id=command.session_id, command_id=command.command_id, status="done",
                         outcome=event.type, seq=event.seq, queued=queued, note=note)


@dataclass(frozen=True)
class Waits:
    """How long a request waits for its outcome, and how often it asks Postgres meanwhile."""

    wait_s: float
    poll_s: float  # Postgres, when the feed is not running
    recheck_s: float = 1.0  # Postgres, while the feed runs: only what the feed missed
    archive_poll_s: float = 0.02  # Postgres, for an outcome the feed has seen but the archiver not yet


class CommandDispatcher:
    def __init__(self, inbox: Inbox, store: SessionStore, waits: Waits, max_record_bytes: int,
                 submit_timeout_s: float = 10.0, listeners: Listeners | None = None,
                 feed_running: Callable[[], bool] = lambda: False, quotas: Admission | None = None):
        self._inbox, self._store, self._waits = inbox, store, waits
        self._max_record_bytes, self._submit_timeout_s = max_record_bytes, submit_timeout_s
        self._listeners = listeners or Listeners()
        self._feed_running = feed_running
        self._quotas = quotas or AdmitAll()  # none: an app run without its lifespan (unit tests)

    def admit(self, request_body: BaseModel | None) -> None:
        """413 for a body that could not fit in one event, before a command is built from it."""
        admit(request_body, self._max_record_bytes)

    async def dispatch(self, command: CommandBase, wait: bool = True,
                       idempotency_key: str | None = None, archived: bool = False) -> CommandPublic:
        """Sends the command unless its outcome is already recorded (a retry); raises on
        rejection (by code), on a key reused for another request (422), on size (413) and
        over a rate quota (429).
        `archived`: answer only once Postgres holds the outcome (or the wait runs out)."""
        command, outcome = await self.send(command, wait, idempotency_key, archived)
        return describe(command, outcome, self._waits.wait_s)

    async def send(self, command: CommandBase, wait: bool = True, idempotency_key: str | None = None,
                   archived: bool = False) -> tuple[CommandBase, Event | None]:
        """`dispatch`, returning the command as sent and its outcome event (None: pending)."""
        admit_command(command, self._max_record_bytes)
        if idempotency_key is not None:
            command = keyed(command, idempotency_key)
        with self._listeners.outcome(command.tenant, command.session_id, command.command_id) as heard:
            outcome = None
            if idempotency_key is not None:
                outcome = await self._first_outcome_of_key(command, idempotency_key)
            if outcome is None:
                await self._quotas.admit(command)  # 429 over a rate quota: nothing is sent
                await self._submit(command)
                if wait:
                    outcome = await self.await_outcome(command, heard, earlier_possible=idempotency_key is not None)
                    if outcome is not None and archived:
                        outcome = await self._archived(command, outcome)
        if isinstance(outcome, InputRejected):
            await self._raise_rejection(command, outcome)
        return command, outcome

    async def await_outcome(self, command: CommandBase, heard: asyncio.Future[Event],
                            earlier_possible: bool = False) -> Event | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._waits.wait_s
        while True:
            remaining = deadline - loop.time()
            live = self._feed_running()
            pause = max(0.0, min(self._waits.recheck_s if live else self._waits.poll_s, remaining))
            if live and pause > 0:
                await asyncio.wait({heard}, timeout=pause)
            if heard.done() and not heard.cancelled():
                return await self._earliest(command, heard.result()) if earlier_possible else heard.result()
            event = await self._store.outcome(command.tenant, command.session_id, command.command_id)
            if event is not None or remaining <= 0:
                return event
            if not live:
                await asyncio.sleep(pause)

    async def _earliest(self, command: CommandBase, heard: Event) -> Event:
        """A retried command's first outcome may predate this request (a queued message is
        answered twice): the feed then shows the later one, Postgres the first."""
        stored = await self._store.outcome(command.tenant, command.session_id, command.command_id)
        return stored if stored is not None and stored.seq < heard.seq else heard

    async def _archived(self, command: CommandBase, heard: Event) -> Event:
        """The outcome as Postgres has it, polled briefly: the brain has answered, so only the
        archiver's lag is left. At the deadline the feed's answer stands."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._waits.wait_s
        while (stored := await self._store.outcome(command.tenant, command.session_id, command.command_id)) is None:
            if loop.time() >= deadline:
                return heard
            await asyncio.sleep(self._waits.archive_poll_s)
        return stored

    async def _first_outcome_of_key(self, command: CommandBase, idempotency_key: str) -> Event | None:
        key_id = key_id_of(command.command_id)
        first = await self._store.outcome_for_key(command.tenant, command.session_id, key_id)
        # A first attempt from before digests (causation == key id) cannot be compared: it stands.
        if first is None or first.causation_id in (command.command_id, key_id):
            return first
        raise ApiError(422, f"Idempotency-Key {idempotency_key[:50]!r} was already used in this session for "
                            f"a different request (command {first.causation_id}, seq {first.seq}); a new "
                            "request needs a new key", code="idempotency_key_reused",
                       command_id=first.causation_id, seq=first.seq, session_id=command.session_id)

    async def _submit(self, command: CommandBase) -> None:
        try:
            async with asyncio.timeout(self._submit_timeout_s):  # in this task: wait_for would start one
                await self._inbox.submit(command)
        except MessageSizeTooLargeError as err:  # only if the producer's limit disagrees with ours
            raise RecordTooLarge("the command", encoded_size(command), self._max_record_bytes) from err
        except (KafkaError, TimeoutError) as err:
            # It may still land: a retry with the same Idempotency-Key is then the same command.
            what = type(err).__name__ if isinstance(err, KafkaError) else f"no ack in {self._submit_timeout_s:g} s"
            raise ApiError(503, f"could not put the command on {INBOX} ({what}); retry with the same "
                                "Idempotency-Key", code="unavailable", headers={"Retry-After": "5"},
                           command_id=command.command_id) from err

    async def _raise_rejection(self, command: CommandBase, event: InputRejected) -> None:
        code = rejection_code(event.payload)
        extra: dict[str, object] = {"command_id": command.command_id, "seq": event.seq}
        if code == "conflict":
            # The rejection is itself an event, so the session has moved past it: a retry
            # must use the seq as it is now, never the one the brain compared against.
            # The feed may answer before the archiver has stored the rejection itself.
            stored_seq = await self._store.last_seq(command.tenant, command.session_id)
            extra.update(expected_seq=event.payload.expected_seq, current_seq=max(stored_seq, event.seq))
        raise ApiError(rejection_status(code), f"the brain rejected the command: {event.payload.reason}",
                       code=code, **extra)
