"""Idempotency-Key: a retried request is the same command; another request under the key is refused.

A keyed command's id is `<key id>.<digest>`. The key id is uuid5(tenant, session, key);
the digest is a SHA-256 of the command as the brain will see it, less its id: its type
(the route), actor, session, tool call and every body field. A retry of the same request
is the same command id, so the brain records it once and the gateway returns its first
outcome. Another request under the same key shares the key id but not the digest: the
gateway finds the key's first outcome and answers 422 `idempotency_key_reused` (as the
IETF Idempotency-Key draft advises). The check runs once the first request's outcome is
recorded; two different requests racing under one key before then are both sent.
Without a key every request is a new command.
"""

from __future__ import annotations

import hashlib
import uuid

from wakeline.contract.commands import CommandBase

# Fixed forever: changing it would make a retry after an upgrade a different command.
IDEMPOTENCY_NAMESPACE = uuid.UUID("6f1d3c2e-8b7a-5e4f-9a0b-1c2d3e4f5a6b")
DIGEST_HEX = 32


def new_command_id() -> str:
    return str(uuid.uuid4())


def key_id_for(tenant: str, session_id: str, idempotency_key: str) -> str:
    """What a (tenant, session, key) maps to; before digests it was the whole command id,
    so an outcome caused by exactly this id is a pre-upgrade first attempt of the key."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"command\n{tenant}\n{session_id}\n{idempotency_key}"))


def request_digest(command: CommandBase) -> str:
    canonical = command.model_dump_json(exclude={"command_id"})
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:DIGEST_HEX]


def keyed(command: CommandBase, idempotency_key: str) -> CommandBase:
    """The command with the id its key and content fix."""
    key_id = key_id_for(command.tenant, command.session_id, idempotency_key)
    return command.model_copy(update={"command_id": f"{key_id}.{request_digest(command)}"})


def key_id_of(command_id: str) -> str:
    return command_id.split(".", 1)[0]


def session_id_for(tenant: str, actor: str, idempotency_key: str | None) -> str:
    """The id of a new session; a retried create with the same key names the same session.

    The actor is part of it: two users who happen to pick the same key get two sessions.
    """
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"session\n{tenant}\n{actor}\n{idempotency_key}"))
