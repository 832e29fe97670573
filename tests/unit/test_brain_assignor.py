"""The brain group's assignment: balanced, co-partitioned, and survivors keep their partitions."""

from hypothesis import given, strategies as st

from wakeline.contract.topics import BRAIN_GROUP
from wakeline_brain.assignor import plan


def test_a_joining_brain_takes_only_what_balance_needs_and_the_survivor_keeps_the_rest():
    assert plan(range(6), {"a": [0, 1, 2, 3, 4, 5], "b": []}) == {"a": [0, 1, 2], "b": [3, 4, 5]}


def test_a_dead_brains_partitions_go_to_the_survivors_who_keep_their_own():
    before = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    after = plan(range(6), {"a": before["a"], "c": before["c"]})
    assert set(before["a"]) <= set(after["a"]) and set(before["c"]) <= set(after["c"])
    assert sorted(after["a"] + after["c"]) == [0, 1, 2, 3, 4, 5]


def test_a_partition_claimed_twice_is_given_once():
    assert plan(range(4), {"a": [0, 1], "b": [1, 2]}) == {"a": [0, 1], "b": [2, 3]}


@given(st.integers(1, 24), st.dictionaries(st.text("abcdef", min_size=1, max_size=3),
                                           st.lists(st.integers(0, 30), max_size=10), min_size=1, max_size=7))
def test_every_partition_is_owned_once_and_sizes_differ_by_at_most_one(n, claims):
    result = plan(range(n), claims)
    owned = sorted(p for ps in result.values() for p in ps)
    assert owned == list(range(n))
    sizes = [len(ps) for ps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    # stickiness: a member keeps its claims up to its share (a claim an earlier member
    # also made, or a partition that does not exist, is not its to keep)
    for member, ps in result.items():
        earlier = {p for other, cs in claims.items() if other < member for p in cs}
        own = {p for p in claims[member] if p < n} - earlier
        assert len(own & set(ps)) == min(len(own), len(ps))


def test_a_brain_is_a_static_member_named_by_its_host_unless_told_otherwise():
    from wakeline_brain.settings import BrainSettings
    assert BrainSettings(host="brain-7").group_instance_id == f"{BRAIN_GROUP}-brain-7"
    assert BrainSettings(host="brain-7", static_membership=False).group_instance_id is None
