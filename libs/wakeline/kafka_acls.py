"""Who may do what on Kafka: the ACLs of each service's principal, in one table.

The broker denies whatever no ACL allows (`allow.everyone.if.no.acl.found=false`);
`admin` is its super user (tools, topic creation, tests). Only the brain writes
`wakeline.events`, in transactions whose ids start with its group id; the gateway writes
the inbox and only reads the events feed; the runner reads tool calls and answers with
tool results. Dead letters are written by whoever rejects a record (brain, runner,
archiver). Groups and transactional ids are granted by prefix, so `WAKELINE_GROUP_ID`
and friends may add a suffix (`wakeline-brain-blue`) and stay covered.

`python -m wakeline.admin acls` creates them (idempotent: the broker keeps one copy of
an identical binding); the brain re-routes misplaced inputs to their right partition,
hence its writes to its own input topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from aiokafka.protocol.admin import CreateAclsRequest

from wakeline.kafka_io import make_admin
from wakeline.settings import CommonSettings
from wakeline.topics import DEAD_LETTER, EVENTS, INBOX, TOOL_CALLS, TOOL_RESULTS


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


GRANTS: tuple[Grant, ...] = (
    *_topics("brain", Operation.READ, INBOX, TOOL_RESULTS, EVENTS),
    *_topics("brain", Operation.WRITE, EVENTS, TOOL_CALLS, DEAD_LETTER, INBOX, TOOL_RESULTS),
    *_group("brain", "wakeline-brain"),
    Grant("brain", Operation.WRITE, Resource.TRANSACTIONAL_ID, "wakeline-brain", prefixed=True),
    *_topics("runner", Operation.READ, TOOL_CALLS),
    *_topics("runner", Operation.WRITE, TOOL_RESULTS, DEAD_LETTER),
    *_group("runner", "wakeline-runner"),
    *_topics("archiver", Operation.READ, EVENTS, DEAD_LETTER),
    *_topics("archiver", Operation.WRITE, DEAD_LETTER),
    *_group("archiver", "wakeline-archiver"),
    *_topics("gateway", Operation.WRITE, INBOX),
    *_topics("gateway", Operation.READ, EVENTS),
)


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
