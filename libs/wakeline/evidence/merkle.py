"""A Merkle tree over a tenant's chain heads, and inclusion proofs into it. Pure.

Leaves are the heads sorted by session id; a leaf hashes `0x00 || canonical([session_id,
seq, hash])`, an inner node `0x01 || left || right` (RFC 6962's domain separation, so a
leaf can never pass for a node). A level with an odd count carries its last node up
unchanged. The empty tree's root is sha256 of nothing. A proof is the sibling hashes from
the leaf up, each with the side it sits on; checking it needs the head, the path and the
signed root, nothing of the other sessions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from wakeline.log.chain import canonical_json
from wakeline.contract.events import Frozen

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()


class HeadLike(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def hash(self) -> str: ...


class Step(Frozen):
    side: Literal["left", "right"]  # where the sibling sits
    hash: str


def leaf_hash(session_id: str, seq: int, head_hash: str) -> bytes:
    return hashlib.sha256(b"\x00" + canonical_json([session_id, seq, head_hash])).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _leaves(heads: Mapping[str, HeadLike]) -> tuple[list[str], list[bytes]]:
    order = sorted(heads)
    return order, [leaf_hash(s, heads[s].seq, heads[s].hash) for s in order]


def _up(level: list[bytes]) -> list[bytes]:
    nxt = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    if len(level) % 2:
        nxt.append(level[-1])
    return nxt


def root(heads: Mapping[str, HeadLike]) -> str:
    _, level = _leaves(heads)
    if not level:
        return EMPTY_ROOT
    while len(level) > 1:
        level = _up(level)
    return level[0].hex()


def path(heads: Mapping[str, HeadLike], session_id: str) -> tuple[Step, ...]:
    """The sibling hashes from `session_id`'s leaf to the root; KeyError if it has no head."""
    order, level = _leaves(heads)
    index = order.index(session_id) if session_id in heads else -1
    if index < 0:
        raise KeyError(session_id)
    steps = []
    while len(level) > 1:
        sibling = index ^ 1
        if sibling < len(level):
            steps.append(Step(side="left" if sibling < index else "right", hash=level[sibling].hex()))
        level, index = _up(level), index // 2
    return tuple(steps)


def root_from_path(session_id: str, seq: int, head_hash: str, steps: Sequence[Step]) -> str:
    """The root a head and its path lead to: equal to a signed root, the head is in its tree."""
    current = leaf_hash(session_id, seq, head_hash)
    for step in steps:
        sibling = bytes.fromhex(step.hash)
        current = _node(sibling, current) if step.side == "left" else _node(current, sibling)
    return current.hex()
