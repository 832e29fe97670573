"""Where verify (and the signer) find the witnesses' public key and the file sink, and the key read from there."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from wakeline.evidence.checkpoints import CheckpointSettings
from wakeline.evidence.signing import parse_public_key, pinned


class EvidenceSettings(CheckpointSettings):
    """Where verify finds the signed checkpoints' public key and the file sink (the signer's too)."""

    # The public key as 64 hex characters; else read from the file the signer publishes.
    evidence_public_key: str | None = None
    evidence_public_key_file: Path = Path(".data/signer/signer.key.pub")
    # A pin: a public key with another fingerprint (sha256:<hex>) is refused.
    evidence_key_fingerprint: str | None = None
    signer_sink_dir: Path = Path(".data/witness")
    # Verify with no public key at all (chains and HMAC checkpoints only): off, so a deleted
    # key file is an error (verify exits 2), never a quieter verify that passes.
    verify_without_signed_checkpoints: bool = False


class KeySettings(Protocol):
    """Where a public key is configured: EvidenceSettings, and the gateway's settings."""

    @property
    def evidence_public_key(self) -> str | None: ...

    @property
    def evidence_public_key_file(self) -> Path: ...

    @property
    def evidence_key_fingerprint(self) -> str | None: ...


def public_key(settings: KeySettings) -> bytes | None:
    """The pinned public key, or None when none is configured (signed checkpoints unchecked)."""
    if settings.evidence_public_key is not None:
        text = settings.evidence_public_key
    elif settings.evidence_public_key_file.exists():
        text = settings.evidence_public_key_file.read_text()
    elif settings.evidence_key_fingerprint is not None:
        raise ValueError("a key fingerprint is pinned but there is no public key at "
                         f"{settings.evidence_public_key_file}")
    else:
        return None
    return pinned(parse_public_key(text), settings.evidence_key_fingerprint)
