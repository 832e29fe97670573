"""Partition ownership for the brain group: co-partitioned and sticky.

A brain must own partition p of every input topic at once (it is the single writer of
events p). Range assignment gives that, but it deals partitions out by member id order,
so when a brain joins or dies every survivor may be handed other partitions: each one
then closes its writers, drops its sessions and wakes others, and sessions on healthy
brains pause. This assignor keeps each member's previous partitions (sent as the
member's user data when it joins), moves only what balance needs, and hands every
member the same partition numbers of every topic. `plan` is the pure part.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata


def plan(partitions: Iterable[int], claims: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Balanced (sizes differ by at most one), keeping as many claimed partitions as balance allows."""
    members = sorted(claims)
    if not members:
        return {}
    free = sorted(set(partitions))
    base, extra = divmod(len(free), len(members))
    owner: dict[int, str] = {}
    for member in members:  # a partition two members claim (a zombie's view) goes to the first
        for p in sorted(set(claims[member])):
            if p in free and p not in owner:
                owner[p] = member
    kept = {m: [p for p, o in sorted(owner.items()) if o == m] for m in members}
    # The members holding most get the larger quotas: fewer partitions move.
    by_claim = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_claim)}
    result = {m: kept[m][:quota[m]] for m in members}
    taken = {p for ps in result.values() for p in ps}
    spare = [p for p in free if p not in taken]
    for m in sorted(members, key=lambda m: (len(result[m]) - quota[m], m)):
        while len(result[m]) < quota[m]:
            result[m].append(spare.pop(0))
    return {m: sorted(ps) for m, ps in result.items()}


class StickyCoPartitionedAssignor(AbstractPartitionAssignor):
    """One per brain process: the owned partitions are class state, as aiokafka calls
    assignors through the class."""

    name = "wakeline-sticky-copartitioned"
    version = 0
    owned: list[int] = []

    @classmethod
    def assign(cls, cluster: ClusterMetadata,
               members: Mapping[str, ConsumerProtocolMemberMetadata]) -> dict[str, ConsumerProtocolMemberAssignment]:
        topics = sorted({t for meta in members.values() for t in meta.subscription})
        counts = [len(cluster.partitions_for_topic(t) or ()) for t in topics]
        partitions = range(min(counts) if counts else 0)  # all wakeline topics share one count
        claims = {member: _claimed(meta.user_data) for member, meta in members.items()}
        planned = plan(partitions, claims)
        return {member: ConsumerProtocolMemberAssignment(cls.version, [(t, ps) for t in topics], b"")
                for member, ps in planned.items()}

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), json.dumps(cls.owned).encode())

    @classmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        cls.owned = sorted({tp.partition for tp in assignment.partitions()})


def _claimed(user_data: bytes | None) -> list[int]:
    try:
        value = json.loads(user_data or b"[]")
    except ValueError:
        return []
    return [p for p in value if isinstance(p, int)] if isinstance(value, list) else []
