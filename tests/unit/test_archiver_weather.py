"""Weather versus data: which failures the archiver retries as they are, and how it retries."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
)

from wakeline.storage.archive_rules import BrokenChain, ConflictingEvent
from wakeline.runtime.weather import is_weather
from wakeline_archiver.weather import ride_out


@pytest.mark.parametrize("exc", [
    asyncpg.CannotConnectNowError("the database system is shutting down"),
    asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.InterfaceError("cannot call Transaction.__aexit__(): the underlying connection is closed"),
    # A pooled connection a Postgres restart broke mid-operation (seen in CI): the pool
    # terminates it on release, and the retry gets a fresh one.
    asyncpg.exceptions._base.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
    asyncpg.DeadlockDetectedError("deadlock detected"),
    asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    ConnectionRefusedError(111, "Connect call failed"), TimeoutError(),
    KafkaConnectionError(), KafkaTimeoutError(), NotLeaderForPartitionError(),
], ids=type)
def test_infrastructure_failures_are_weather(exc: BaseException) -> None:
    assert is_weather(exc)


@pytest.mark.parametrize("exc", [
    asyncpg.UniqueViolationError("duplicate key value violates unique constraint \"event_keys_pkey\""),
    asyncpg.ProgramLimitExceededError("index row size 5040 exceeds btree version 4 maximum 2704"),
    asyncpg.CharacterNotInRepertoireError("invalid byte sequence for encoding \"UTF8\": 0x00"),
    asyncpg.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.exceptions._base.DataError("invalid input for query argument $1"),
    ConflictingEvent("s", 2, "a" * 64, "b" * 64), BrokenChain("s", 4, None, "c" * 64),
    MessageSizeTooLargeError(), ValueError("bad"),
], ids=type)
def test_data_failures_are_not_weather(exc: BaseException) -> None:
    assert not is_weather(exc)


async def test_ride_out_retries_weather_until_it_passes() -> None:
    attempts = []

    async def attempt() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise asyncpg.CannotConnectNowError("the database system is starting up")

    assert await ride_out(attempt, "a batch", asyncio.Event())
    assert len(attempts) == 3


async def test_ride_out_raises_a_data_failure_at_once_and_gives_up_when_stopping() -> None:
    async def poison() -> None:
        raise ConflictingEvent("s", 2, "a" * 64, "b" * 64)

    with pytest.raises(ConflictingEvent):
        await ride_out(poison, "a batch", asyncio.Event())

    async def down() -> None:
        raise ConnectionRefusedError(111, "Connect call failed")

    stopping = asyncio.Event()
    stopping.set()
    assert not await asyncio.wait_for(ride_out(down, "a batch", stopping), 1)
