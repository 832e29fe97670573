"""Removing static members from a consumer group by their `group.instance.id` (KIP-345).

aiokafka 0.14 speaks LeaveGroup up to v1, which only lets a member leave by itself; v3 names
other members, as Kafka's admin `removeMembersFromConsumerGroup` does. A member named with no
member id is found by its instance id. A removed member that is in fact alive is told at its
next heartbeat that it is unknown, and joins again under the same instance id.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Int16, Int32, Schema, String

LEAVE_GROUP = 13
_UNKNOWN_MEMBER_ID = ""  # the coordinator looks the member up by its instance id


class _LeaveGroupResponseV3(Response):  # type: ignore[misc]  # aiokafka ships no types
    API_KEY = LEAVE_GROUP
    API_VERSION = 3
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                    ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")),
                                      ("error_code", Int16))))


class _LeaveGroupRequestV3(RequestStruct):  # type: ignore[misc]
    API_KEY = LEAVE_GROUP
    API_VERSION = 3
    RESPONSE_TYPE = _LeaveGroupResponseV3
    SCHEMA = Schema(("group", String("utf-8")),
                    ("members", Array(("member_id", String("utf-8")), ("group_instance_id", String("utf-8")))))


class RemoveStaticMembers(Request[_LeaveGroupRequestV3]):  # type: ignore[misc]
    API_KEY = LEAVE_GROUP

    def __init__(self, group_id: str, instance_ids: Sequence[str]) -> None:
        self._group_id = group_id
        self._instance_ids = list(instance_ids)

    def build(self, request_struct_class: type[_LeaveGroupRequestV3]) -> _LeaveGroupRequestV3:
        return request_struct_class(self._group_id, [(_UNKNOWN_MEMBER_ID, i) for i in self._instance_ids])


async def remove_static_members(client: AIOKafkaClient, group_id: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """Asks the group's coordinator to remove these members; returns each one's answer
    ("NoError", or e.g. "UnknownMemberIdError" for one no longer in the group). Raises the
    coordinator's error for the request as a whole (not the coordinator, not available)."""
    coordinator = await client.coordinator_lookup(CoordinationType.GROUP, group_id)
    response = await client.send(coordinator, RemoveStaticMembers(group_id, instance_ids))
    if response.error_code:
        raise for_code(response.error_code)()
    return {instance: for_code(code).__name__ for _member, instance, code in response.members}
