"""Ed25519 signing of checkpoints: who holds the private key, and checking with the public one.

The signer is an interface (`Signer`: a key id, the public key, `sign(bytes)`), so the
local stack's key file (`FileSigner`), an environment secret (`SecretSigner`) or a KMS
client can stand behind it. Verifying needs only the public key (32 raw bytes, written as
hex); its fingerprint (`sha256:` + hex of sha256 of those bytes) is what an operator pins
and what every signed checkpoint names as `key_id`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SCHEME = "ed25519:"
SEED_BYTES = 32


class Signer(Protocol):
    @property
    def key_id(self) -> str: ...

    def public_key(self) -> bytes: ...

    def sign(self, message: bytes) -> str: ...


def fingerprint(public: bytes) -> str:
    return "sha256:" + hashlib.sha256(public).hexdigest()


class SeedSigner:
    """Signs with an Ed25519 key held in memory (from a file or a secret)."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 private key is {SEED_BYTES} bytes, got {len(seed)}")
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self._public = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def key_id(self) -> str:
        return fingerprint(self._public)

    def public_key(self) -> bytes:
        return self._public

    def sign(self, message: bytes) -> str:
        return SCHEME + self._key.sign(message).hex()


def file_signer(path: Path, *, create: bool = False) -> SeedSigner:
    """The signer whose seed is hex in `path` (0600); with `create`, made when missing.

    Its public key is written beside it (`<path>.pub`) so it can be published.
    """
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:  # O_EXCL: two signers starting at once must not end up with different keys
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as out:
                out.write(os.urandom(SEED_BYTES).hex() + "\n")
    signer = secret_signer(path.read_text())
    public = public_key_path(path)
    if not public.exists() or public.read_text().strip() != signer.public_key().hex():
        public.write_text(signer.public_key().hex() + "\n")
    return signer


def secret_signer(secret: str) -> SeedSigner:
    """From the hex seed itself (an environment secret)."""
    try:
        seed = bytes.fromhex(secret.strip())
    except ValueError as exc:
        raise ValueError("the signing key is not hex") from exc
    return SeedSigner(seed)


def public_key_path(private_path: Path) -> Path:
    return private_path.with_name(private_path.name + ".pub")


def parse_public_key(text: str) -> bytes:
    """32 raw bytes from hex; ValueError naming what is wrong otherwise."""
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError as exc:
        raise ValueError("an Ed25519 public key is 64 hex characters") from exc
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, got {len(raw)}")
    return raw


def pinned(public: bytes, pin: str | None) -> bytes:
    """`public` if it matches the pinned fingerprint (or nothing is pinned); ValueError if not."""
    if pin is not None and fingerprint(public) != pin.strip():
        raise ValueError(f"the public key's fingerprint {fingerprint(public)} is not the pinned {pin.strip()}")
    return public


def signature_valid(public: bytes, message: bytes, signature: str) -> bool:
    if not signature.startswith(SCHEME):
        return False
    try:
        raw = bytes.fromhex(signature[len(SCHEME):])
        Ed25519PublicKey.from_public_bytes(public).verify(raw, message)
    except (ValueError, InvalidSignature):
        return False
    return True
