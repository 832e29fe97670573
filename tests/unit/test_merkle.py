"""The Merkle tree over chain heads: every head's path leads to the root, a changed head or
path does not, and the root depends on every head."""

from __future__ import annotations

import pytest

from wakeline.evidence import merkle
from wakeline.evidence.heads import Head


def heads(n: int) -> dict[str, Head]:
    return {f"s-{i:03d}": Head(seq=i + 1, hash=f"{i:064x}") for i in range(n)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 33])
def test_every_heads_path_leads_to_the_root(n: int) -> None:
    tree = heads(n)
    root = merkle.root(tree)
    for sid, head in tree.items():
        assert merkle.root_from_path(sid, head.seq, head.hash, merkle.path(tree, sid)) == root


def test_a_changed_head_or_path_leads_elsewhere() -> None:
    tree = heads(9)
    root, path = merkle.root(tree), merkle.path(tree, "s-004")
    assert merkle.root_from_path("s-004", 6, tree["s-004"].hash, path) != root
    assert merkle.root_from_path("s-004", 5, "f" * 64, path) != root
    assert merkle.root_from_path("s-005", 5, tree["s-004"].hash, path) != root
    flipped = (path[0].model_copy(update={"side": "left" if path[0].side == "right" else "right"}), *path[1:])
    assert merkle.root_from_path("s-004", 5, tree["s-004"].hash, flipped) != root


def test_the_root_covers_every_head_and_not_the_insertion_order() -> None:
    tree = heads(6)
    assert merkle.root(dict(reversed(list(tree.items())))) == merkle.root(tree)
    for sid in tree:
        changed = {**tree, sid: Head(seq=tree[sid].seq + 1, hash=tree[sid].hash)}
        assert merkle.root(changed) != merkle.root(tree)
    assert merkle.root({}) == merkle.EMPTY_ROOT != merkle.root(heads(1))


def test_a_leaf_cannot_pass_for_an_inner_node() -> None:
    # Domain separation: a two-leaf tree's root is not the leaf hash of anything we could name.
    tree = heads(2)
    assert merkle.root(tree) not in {merkle.leaf_hash(s, h.seq, h.hash).hex() for s, h in tree.items()}


def test_no_path_for_a_session_without_a_head() -> None:
    with pytest.raises(KeyError):
        merkle.path(heads(3), "nobody")
