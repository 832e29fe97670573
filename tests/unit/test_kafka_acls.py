"""The ACL table for a topic prefix covers that prefix's names and no other prefix's.

`covers` is the broker's matching rule: a LITERAL binding names one resource, a PREFIXED one
every resource whose name starts with it. So the grants `make up` creates for the demo
(`wakeline`) and those `make test` adds for the suite (`wakeline-test`) sit side by side on
one broker without either principal reaching the other's topics, groups or transactional ids.
"""

from __future__ import annotations

import pytest

from tests.private_broker import environ
from wakeline.ops.kafka_acls import GRANTS, Grant, Operation, Resource, grants
from wakeline.runtime.settings import Naming
from wakeline.contract.topics import NAMES, Names, names

DEMO, SUITE = names("wakeline"), names("wakeline-test")


def covers(grant: Grant, resource: Resource, name: str) -> bool:
    return grant.resource == resource and (name.startswith(grant.name) if grant.prefixed else name == grant.name)


def resources(n: Names) -> list[tuple[Resource, str]]:
    """What the services use under `n`: its topics, groups (a suffixed one too) and the brain's transactional ids."""
    groups = [n.group(s) for s in ("brain", "runner", "archiver")] + [f"{n.group('archiver')}-weather-1"]
    return ([(Resource.TOPIC, t) for t in n.all_topics] + [(Resource.GROUP, g) for g in groups]
            + [(Resource.TRANSACTIONAL_ID, f"{n.group('brain')}-p{p}") for p in (0, 5)])


def test_the_grants_in_force_are_those_of_the_prefix_in_force():
    assert GRANTS == grants(NAMES)


def test_topics_are_granted_literally_and_groups_and_transactional_ids_by_prefix():
    for g in grants(SUITE):
        assert g.prefixed == (g.resource != Resource.TOPIC), g
        assert g.name.startswith("wakeline-test"), g


@pytest.mark.parametrize(("own", "other"), [(DEMO, SUITE), (SUITE, DEMO)])
def test_one_prefixs_grants_cover_its_own_names_and_none_of_anothers(own: Names, other: Names):
    table = grants(own)
    assert all(any(covers(g, *r) for g in table) for r in resources(own))
    assert [(g, r) for g in table for r in resources(other) if covers(g, *r)] == []


def test_only_the_brain_may_write_the_event_log_or_take_a_brain_transactional_id():
    writers = {g.principal for g in grants(SUITE) if g.operation == Operation.WRITE and covers(g, Resource.TOPIC,
                                                                                                 SUITE.events)}
    takers = {g.principal for g in grants(SUITE) if covers(g, Resource.TRANSACTIONAL_ID, f"{SUITE.group('brain')}-p0")}
    assert writers == takers == {"brain"}


@pytest.mark.parametrize("prefix", ["", "wake line", "wakeline/test", "x" * 201])
def test_a_prefix_kafka_would_refuse_in_a_topic_name_is_refused(prefix: str):
    with environ(WAKELINE_TOPIC_PREFIX=prefix), pytest.raises(ValueError, match="topic_prefix"):
        Naming()
