"""Who may do what on Kafka: the ACLs of each service's principal, in one table.

The broker denies whatever no ACL allows (`allow.everyone.if.no.acl.found=false`);
`admin` is its super user (tools, topic creation, tests). Only the brain writes
`<prefix>.events`, in transactions whose ids start with its group id; the gateway writes
the inbox and only reads the events feed; the runner reads tool calls and answers with
tool results. Dead letters are written by whoever rejects a record (brain, runner,
archiver). The checkpoint signer only writes `<prefix>.checkpoints`. Topics are granted
by their literal names; groups and transactional ids by prefix (`<prefix>-brain`, ...), so
`WAKELINE_GROUP_ID` and friends may add a suffix (`wakeline-brain-blue`) and stay covered.

`grants(names)` is the table for one topic prefix (`wakeline.contract.topics.names`); `GRANTS` is
the one in force. `python -m wakeline.ops.admin acls` creates those (idempotent: the broker
keeps one copy of an identical binding), so running it under the suite's
`WAKELINE_TOPIC_PREFIX` adds the suite's grants beside the demo's; neither covers the
other's names (`wakeline-brain` is not a prefix of `wakeline-test-brain`). The brain
re-routes misplaced inputs to their right partition, hence its writes to its own input
topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from aiokafka.protocol.admin import CreateAclsRequest

from wakeline.transport.kafka_io import make_admin
from wakeline.runtime.settings import CommonSettings
from wakeline.contract.topics import NAMES, Names


class Resource(IntEnum):  # Kafka's AclResourceType codes
    TOPIC = 2
    GROUP = 3
    TRANSACTIONAL_ID = 5


class Operation(IntEnum):  # Kafka's AclOperation codes
    READ = 3
    WRITE = 4  # READ and WRITE imply DESCRIBE


_LITERAL, _PREFIXED, _ALLOW = 3, 4, 3


@dataclass(frozen=True)
class Grant:
    principal: str
    operation: Operation
    resource: Resource
    name: str
    prefixed: bool = False


def _topics(principal: str, operation: Operation, *names: str) -> list[Grant]:
    return [Grant(principal, operation, Resource.TOPIC, name) for name in names]


def _group(principal: str, prefix: str) -> list[Grant]:
    return [Grant(principal, Operation.READ, Resource.GROUP, prefix, prefixed=True)]


def grants(n: Names) -> tuple[Grant, ...]:
    """Every principal's grants on the topics, groups and transactional ids of `n`'s prefix."""
    return (
        *_topics("brain", Operation.READ, n.inbox, n.tool_results, n.events),
        *_topics("brain", Operation.WRITE, n.events, n.tool_calls, n.dead_letter, n.inbox, n.tool_results,
                 n.deltas),
        *_group("brain", n.group("brain")),
        Grant("brain", Operation.WRITE, Resource.TRANSACTIONAL_ID, n.group("brain"), prefixed=True),
        *_topics("runner", Operation.READ, n.tool_calls),
        *_topics("runner", Operation.WRITE, n.tool_results, n.dead_letter),
        *_group("runner", n.group("runner")),
        *_topics("archiver", Operation.READ, n.events, n.dead_letter),
        *_topics("archiver", Operation.WRITE, n.dead_letter),
        *_group("archiver", n.group("archiver")),
        *_topics("gateway", Operation.WRITE, n.inbox),
        *_topics("gateway", Operation.READ, n.events, n.deltas),
        # The checkpoint signer publishes each signed statement (witnesses.py) and reads
        # nothing on Kafka. (The local stack's signer logs in as `admin`: its broker has no
        # `signer` user; deploy/k8s gives it this one.)
        *_topics("signer", Operation.WRITE, n.checkpoints),
    )


GRANTS = grants(NAMES)


async def create_acls(settings: CommonSettings, grants: tuple[Grant, ...] = GRANTS) -> int:
    """Creates every grant as an ALLOW binding for host *; returns how many were sent."""
    admin = make_admin(settings)
    await admin.start()
    try:
        node = admin._client.get_random_node()  # noqa: SLF001 - aiokafka 0.14 has no create_acls
        for g in grants:
            request = CreateAclsRequest(int(g.resource), g.name, _PREFIXED if g.prefixed else _LITERAL,
                                        f"User:{g.principal}", "*", int(g.operation), _ALLOW)
            response = await admin._client.send(node, request)  # noqa: SLF001
            for result in response.to_object()["creation_responses"]:
                if result["error_code"]:
                    raise RuntimeError(f"the broker refused {g}: {result['error_message'] or result['error_code']}")
        return len(grants)
    finally:
        await admin.close()
