"""Identifiers every input carries: one charset and length, checked at decode.

Session ids, tenants, command ids and tool call ids become Kafka keys, Postgres keys,
directory names in the sandbox and parts of URLs, so they are plain names: an ASCII
letter or digit first, then letters, digits and `._:@-`, at most 200 characters. No NUL,
no control characters, no whitespace, no slash, nothing that could be `..`. Actors name
who did something (`user:<principal>`): bounded and free of control characters, because
they are indexed and shown.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
SAFE_ID = re.compile(ID_PATTERN)
ID = Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]

# Names that are shown and indexed but are not ids (a tool's name, a runner's host).
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"

# A chain hash as `chain.seal` writes it (SHA-256, lowercase hex): the only spelling stored,
# since the bytes go back to text one way (event_store.hash_bytes, archiver bounds).
CHAIN_HASH = re.compile(r"^[0-9a-f]{64}$")

ACTOR_KINDS = ("user", "human", "service", "system", "agent", "runner")
ACTOR_PATTERN = r"^(user|human|service|system|agent|runner):[^\x00-\x1f\x7f]{1,200}$"
Actor = Annotated[str, Field(min_length=3, max_length=210, pattern=ACTOR_PATTERN)]
