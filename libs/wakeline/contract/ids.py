"""Identifiers every input carries: one charset and length, checked at decode.

Session ids, tenants, command ids and tool call ids become Kafka keys, Postgres keys,
directory names in the sandbox and parts of URLs, so they are plain names: an ASCII
letter or digit first, then letters, digits and `._:@-`, at most 200 characters. No NUL,
no control characters, no whitespace, no slash, nothing that could be `..`. Actors name
who did something (`user:<principal>`): bounded and free of control characters, because
they are indexed and shown.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from typing import Annotated

from pydantic import Field

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
SAFE_ID = re.compile(ID_PATTERN)
ID = Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]

# Names that are shown and indexed but are not ids (a tool's name, a runner's host).
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"

# A chain hash as `chain.seal` writes it (SHA-256, lowercase hex): the only spelling stored,
# since the bytes go back to text one way (event_rows.hash_bytes, archiver bounds).
CHAIN_HASH = re.compile(r"^[0-9a-f]{64}$")

ACTOR_KINDS = ("user", "human", "service", "system", "agent", "runner")
ACTOR_PATTERN = r"^(user|human|service|system|agent|runner):[^\x00-\x1f\x7f]{1,200}$"
Actor = Annotated[str, Field(min_length=3, max_length=210, pattern=ACTOR_PATTERN)]


def time_ordered_id(unix_ms: int | None = None, random_bits: int | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits.

    Event ids are the key of `event_keys_event_id_key`, an index on every event ever
    archived. Random (v4) ids land anywhere in it, so its pages split in the middle and
    stay about 70% full; ids that grow with time land at its right edge, where Postgres
    leaves pages 90% full. Uniqueness is the random bits' (74 per millisecond), as with v4;
    nothing reads the time back out of an id. `unix_ms` and `random_bits` (80 bits, 74
    used) are for made-up data that must come out the same every time (the benches).
    """
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    rand = int.from_bytes(os.urandom(10), "big") if random_bits is None else random_bits
    value = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | ((rand >> 62 & 0xFFF) << 64) \
        | (0b10 << 62) | (rand & 0x3FFF_FFFF_FFFF_FFFF)
    return str(uuid.UUID(int=value))
