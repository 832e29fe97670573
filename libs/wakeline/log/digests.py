"""`Digests`: an immutable set of 64-bit digests kept sorted in one packed array.

What `SessionState.seen_commands` is (`state.command_digest`). A frozenset of n ints costs
an object per digest to build from a snapshot and a copy of all n to add one; here a
snapshot's set is one copy of its bytes, a look-up is a bisection, and adding k digests
costs k moves of the array (one sort when k is large). It renders as base64 of the sorted
digests, 8 bytes each, big-endian: one JSON string, a third of a list of numbers.

A wake takes a snapshot's packing at its word, as it does every other field; one that is
not sorted renders differently from the fold, so `snapshots.checked_fold` catches it.
"""

from __future__ import annotations

import base64
import sys
from array import array
from bisect import bisect_left, insort
from typing import Any, Iterable, Iterator

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema


class Digests:
    __slots__ = ("_sorted",)
    _sorted: array[int]

    def __init__(self, digests: Iterable[int] = ()):
        self._sorted = array("Q", sorted(set(digests)))

    @classmethod
    def _of(cls, packed: array[int]) -> Digests:
        new = object.__new__(cls)
        new._sorted = packed
        return new

    def __contains__(self, digest: object) -> bool:
        if not isinstance(digest, int):
            return False
        at = bisect_left(self._sorted, digest)
        return at < len(self._sorted) and self._sorted[at] == digest

    def __len__(self) -> int:
        return len(self._sorted)

    def __iter__(self) -> Iterator[int]:
        return iter(self._sorted)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digests) and self._sorted == other._sorted

    def __hash__(self) -> int:
        return hash(self._sorted.tobytes())

    def __repr__(self) -> str:
        return f"Digests(<{len(self)}>)"

    def with_added(self, digests: Iterable[int]) -> Digests:
        new = sorted({d for d in digests if d not in self})
        if not new:
            return self
        if len(new) * 16 > len(self._sorted):  # many at once (a fold from the start): one sort
            return Digests._of(array("Q", sorted([*self._sorted, *new])))
        merged = array("Q", self._sorted)
        for digest in new:
            insort(merged, digest)
        return Digests._of(merged)

    def packed(self) -> str:
        out = array("Q", self._sorted)
        if sys.byteorder == "little":
            out.byteswap()
        return base64.b64encode(out.tobytes()).decode("ascii")

    @classmethod
    def unpacked(cls, text: str) -> Digests:
        raw = base64.b64decode(text, validate=True)
        if len(raw) % 8:
            raise ValueError(f"{len(raw)} bytes is not a whole number of 8-byte digests")
        digests = array("Q")
        digests.frombytes(raw)
        if sys.byteorder == "little":
            digests.byteswap()
        return cls._of(digests)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        from_text = core_schema.no_info_after_validator_function(cls.unpacked, core_schema.str_schema())
        return core_schema.json_or_python_schema(
            json_schema=from_text,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_text]),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda d: d.packed(), when_used="json"),
        )
