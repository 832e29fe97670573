"""`Digests`, the packed sorted set behind `seen_commands`: it behaves as the set of its
digests however they were added, and its packing round-trips exactly."""

import base64

import pytest
from hypothesis import given, strategies as st

from wakeline.log.digests import Digests

DIGEST = st.integers(min_value=0, max_value=2**64 - 1)


@given(st.sets(DIGEST), st.lists(st.sets(DIGEST, max_size=40), max_size=6), DIGEST)
def test_digests_are_the_set_of_what_was_added_whichever_way_it_was_merged(start, additions, probe):
    digests, expected = Digests(start), set(start)
    for added in additions:  # small additions insert, large ones sort: both must agree with a set
        digests, expected = digests.with_added(added), expected | added
    assert list(digests) == sorted(expected) and len(digests) == len(expected)
    assert all(d in digests for d in expected) and (probe in digests) == (probe in expected)
    assert digests == Digests(expected) and hash(digests) == hash(Digests(expected))


@given(st.sets(DIGEST))
def test_the_packing_is_sorted_big_endian_and_round_trips(values):
    digests = Digests(values)
    raw = base64.b64decode(digests.packed())
    assert [int.from_bytes(raw[i:i + 8], "big") for i in range(0, len(raw), 8)] == sorted(values)
    assert Digests.unpacked(digests.packed()) == digests


def test_adding_nothing_new_is_the_same_value():
    digests = Digests({1, 2, 3})
    assert digests.with_added({2, 3}) is digests and digests.with_added(()) is digests


@pytest.mark.parametrize("text", ["AAAA", "not base64!"])
def test_a_packing_that_is_not_whole_digests_is_refused(text):
    with pytest.raises(ValueError):
        Digests.unpacked(text)
