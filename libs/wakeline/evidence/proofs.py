"""Inclusion proofs: one session's head, its Merkle path and the signed statement whose root
the path leads to. `python -m wakeline.evidence.proofs check FILE --public-key HEX` checks one
offline, with the public key alone: no database, no other session's head.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import asyncpg

from wakeline.evidence import merkle
from wakeline.evidence.heads import Head
from wakeline.contract.events import Frozen
from wakeline.evidence.cross_check import Evidence
from wakeline.evidence.signed_checkpoints import Envelope
from wakeline.evidence.signing import fingerprint, parse_public_key, pinned, signature_valid


class InclusionProof(Frozen):
    session_id: str
    head: Head
    path: tuple[merkle.Step, ...]
    checkpoint: Envelope  # the signed statement (tenant, number, root, ...)


def build_proof(evidence: Evidence, session_id: str) -> InclusionProof | None:
    """From the newest genuine checkpoint naming the session; None when none does."""
    found = evidence.newest_with(session_id)
    if found is None or found.heads is None:
        return None
    return InclusionProof(session_id=session_id, head=found.heads[session_id],
                          path=merkle.path(found.heads, session_id), checkpoint=found.envelope)


async def proof_from_postgres(conn: asyncpg.Connection, session_id: str) -> InclusionProof | None:
    """From the newest row of `signed_checkpoints` naming the session (tenant set on `conn`).

    Nothing here is trusted: the proof is checked offline under the public key, so a
    gateway that serves it needs no key. Heads that do not hash to the signed root give a
    proof that fails that check, which is the point.
    """
    row = await conn.fetchrow("SELECT statement, signature, heads FROM signed_checkpoints WHERE heads ? $1 "
                              "ORDER BY number DESC LIMIT 1", session_id)
    if row is None:
        return None
    heads = {s: Head.model_validate(h) for s, h in json.loads(row["heads"]).items()}
    return InclusionProof(session_id=session_id, head=heads[session_id], path=merkle.path(heads, session_id),
                          checkpoint=Envelope(statement=row["statement"], signature=row["signature"]))


def check_proof(proof: InclusionProof, public: bytes) -> list[str]:
    """What is wrong with `proof` under `public`; empty when it proves the head was signed."""
    problems = []
    statement = proof.checkpoint.parsed()
    if not signature_valid(public, proof.checkpoint.statement.encode(), proof.checkpoint.signature):
        problems.append("the checkpoint's signature does not verify under this public key")
    if statement.key_id != fingerprint(public):
        problems.append(f"the checkpoint names key {statement.key_id}, not {fingerprint(public)}")
    reached = merkle.root_from_path(proof.session_id, proof.head.seq, proof.head.hash, proof.path)
    if reached != statement.root:
        problems.append(f"the head and path lead to root {reached[:16]}…, the checkpoint signed "
                        f"{statement.root[:16]}…")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Exit 0 if the proof holds, 1 if it does not, 2 if it cannot be read."""
    parser = argparse.ArgumentParser(prog="python -m wakeline.evidence.proofs")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("proof", help="a file holding the proof JSON (`-`: stdin)")
    key = parser.add_mutually_exclusive_group(required=True)
    key.add_argument("--public-key", help="64 hex characters")
    key.add_argument("--public-key-file", type=Path)
    parser.add_argument("--fingerprint", help="refuse a public key with another fingerprint (a pin)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        text = sys.stdin.read() if args.proof == "-" else Path(args.proof).read_text()
        proof = InclusionProof.model_validate_json(text.strip().splitlines()[-1])
        raw = args.public_key if args.public_key is not None else args.public_key_file.read_text()
        public = pinned(parse_public_key(raw), args.fingerprint)
    except (OSError, ValueError, IndexError) as exc:
        print(f"proofs: cannot check: {exc}", file=sys.stderr)
        return 2
    problems = check_proof(proof, public)
    statement = proof.checkpoint.parsed()
    for problem in problems:
        print(f"BROKEN: {problem}")
    if not problems:
        print(f"OK: session {proof.session_id} at seq {proof.head.seq} is in checkpoint #{statement.number} "
              f"of tenant {statement.tenant} ({statement.created_at.isoformat()}), signed by {statement.key_id}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
