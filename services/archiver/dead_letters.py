"""Projecting `wakeline.dead-letter` into the `dead_letters` table.

Each record is a `codec.DeadLetter` naming the rejected record, why and by whom. A
letter that is itself unreadable is still stored, with its own position as the source
and the reason "unparseable dead letter: ...": nothing on this topic is dropped, and
nothing any producer writes here can fail the batch (positions are range-checked,
indexed names cut to fit, NUL escaped). Rows are identified by the letter's own
position (see migration 0002), and the batch's offsets are stored in the same
transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wakeline.contract.codec import DeadLetter, MalformedRecord, decode
from wakeline.storage.archive_writes import save_offsets
from wakeline.storage.pg import TenantPool
from wakeline_archiver.records import RawRecord, without_nul
from wakeline_archiver.offsets import next_offsets

UNPARSEABLE = "unparseable dead letter"
MAX_NAME = 249  # Kafka's longest topic name
LETTER_COLUMNS = ("topic", "partition", '"offset"', "key", "value", "reason", "service", "dl_topic",
                  "dl_partition", "dl_offset")
_TYPES = ("text", "int", "bigint", "text", "text", "text", "text", "text", "int", "bigint")
INSERT_LETTERS = (
    f"INSERT INTO dead_letters ({', '.join(LETTER_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{t}[]" for i, t in enumerate(_TYPES, 1)) + ") ON CONFLICT DO NOTHING")


def letter_row(record: RawRecord) -> tuple[Any, ...]:
    """The `dead_letters` row for one record of the dead-letter topic, in LETTER_COLUMNS order."""
    try:
        letter = _in_range(decode(record.value, DeadLetter.model_validate_json))
    except MalformedRecord as bad:
        raw = (record.value or b"").decode("utf-8", "replace")[:100_000]
        key = record.key.decode("utf-8", "replace") if record.key is not None else None
        letter = DeadLetter(topic=record.topic, partition=record.partition, offset=record.offset, key=key,
                            value=raw, reason=f"{UNPARSEABLE}: {bad.reason}", service="archiver")
    # topic and service are indexed (dead_letters_source): a letter from any producer must fit a btree row.
    return (without_nul(letter.topic[:MAX_NAME]), letter.partition, letter.offset, without_nul(letter.key),
            without_nul(letter.value), without_nul(letter.reason), without_nul(letter.service[:MAX_NAME]),
            record.topic, record.partition, record.offset)


LetterRows = tuple[list[tuple[Any, ...]], dict[tuple[str, int], int]]


def letter_rows(records: Sequence[RawRecord]) -> LetterRows:
    """A batch's rows and the offsets it moves to: the pure half, which the stream runs ahead."""
    return [letter_row(r) for r in records], next_offsets((r.topic, r.partition, r.offset) for r in records)


def _in_range(letter: DeadLetter) -> DeadLetter:
    """The reported position must fit its int and bigint columns, or the whole batch would fail."""
    if not (-2**31 <= letter.partition < 2**31 and -2**63 <= letter.offset < 2**63):
        raise MalformedRecord(f"position out of range: partition {letter.partition}, offset {letter.offset}")
    return letter


class DeadLetterArchiver:
    def __init__(self, pool: TenantPool, group: str):
        self._pool = pool
        self._group = group

    async def archive(self, records: Sequence[RawRecord]) -> None:
        await self.archive_rows(letter_rows(records))

    async def archive_rows(self, prepared: LetterRows) -> None:
        rows, offsets = prepared
        async with self._pool.system_transaction() as conn:
            if rows:
                await conn.execute(INSERT_LETTERS, *zip(*rows))
            await save_offsets(conn, self._group, offsets)
