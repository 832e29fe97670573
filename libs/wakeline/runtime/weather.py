"""Weather: failures of the infrastructure, not of the data.

A database or broker restart, a dropped connection, a deadlock or a full connection
table says nothing about the input being handled: the same work is retried with
backoff, and nothing is parked or dead-lettered for it. Everything else is a fact about
the data. The archiver (`wakeline_archiver.weather.ride_out`) and the brain's wake both
decide with `is_weather`. Pure.
"""

from __future__ import annotations

import asyncpg
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

# SQLSTATE classes: 08 connection exception, 57 operator intervention (admin shutdown,
# cannot connect now), 53 insufficient resources, 40 transaction rollback (deadlock,
# serialization). 57014 is a cancelled statement: retrying a poison batch would loop.
_WEATHER_CLASSES = ("08", "57", "53", "40")
_NOT_WEATHER = ("57014",)


def is_weather(exc: BaseException) -> bool:
    """True if `exc` comes from the infrastructure, so retrying the same work can succeed."""
    if isinstance(exc, asyncpg.exceptions._base.DataError):  # bad query input: an InterfaceError, but data
        return False
    if isinstance(exc, (OSError, TimeoutError, asyncpg.InterfaceError, KafkaConnectionError, KafkaTimeoutError)):
        return True
    if isinstance(exc, asyncpg.exceptions._base.InternalClientError):
        # A connection left mid-operation when Postgres restarted under it ("cannot switch
        # to state 15; another operation is in progress"): the pool terminates it when it
        # is released, so the retry runs on a fresh one. Seen once in CI, stopping the archiver.
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = exc.sqlstate or ""
        return state[:2] in _WEATHER_CLASSES and state not in _NOT_WEATHER
    return isinstance(exc, KafkaError) and bool(exc.retriable)
