"""A session's chain against what was signed for it: the HMAC checkpoints (genuine, and the
newest one's head still held) and every head the Ed25519-signed checkpoints name."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from wakeline.evidence.checkpoints import Checkpoint, signature_valid
from wakeline.evidence.cross_check import Evidence
from wakeline.evidence.signed_checkpoints import SignedCut
from wakeline.storage.retention_cuts import Cut
from wakeline.evidence.verify.reports import Problem


def checkpoint_integrity(stored: Sequence[Checkpoint], anchored: Sequence[Checkpoint],
                         key: bytes | None) -> tuple[list[Problem], list[Checkpoint]]:
    """Each anchored checkpoint present and unchanged in the database, each signature valid.

    Returns the problems and the genuine checkpoints (all of them when there is no key).
    """
    problems = []
    in_db = {c.id: c for c in stored}
    for cp in anchored:
        if cp.id not in in_db:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} is in the anchor file "
                                                     "but missing from the database"))
        elif in_db[cp.id] != cp:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} in the database differs "
                                                     "from the anchor file"))
    genuine = []
    for cp in {c.model_dump_json(): c for c in [*stored, *anchored]}.values():
        if key is None or signature_valid(key, cp):
            genuine.append(cp)
        else:
            problems.append(Problem(seq=None, reason=f"checkpoint {cp.id} is tampered: "
                                                     "its signature does not verify"))
    return problems, genuine


def checkpoint_problems(session_id: str, stored: Sequence[Checkpoint], anchored: Sequence[Checkpoint],
                        key: bytes | None, hash_at: dict[int, str]) -> tuple[list[Problem], uuid.UUID | None]:
    """The checkpoints naming the session are genuine, and the newest agrees with the chain.

    Returns the problems and the id of the checkpoint the chain was compared with.
    """
    problems, genuine = checkpoint_integrity([c for c in stored if session_id in c.heads],
                                             [c for c in anchored if session_id in c.heads], key)
    if not genuine:
        return problems, None
    newest = max(genuine, key=lambda c: c.created_at)
    return problems + head_problems(session_id, newest, hash_at), newest.id


def head_problems(session_id: str, newest: Checkpoint, hash_at: dict[int, str]) -> list[Problem]:
    """The chain still holds, at the seq `newest` signed for the session, the hash it signed."""
    head = newest.heads[session_id]
    found = hash_at.get(head.seq)
    since = f"rewritten since checkpoint {newest.id}"
    if found is None:
        return [Problem(seq=head.seq, reason=f"{since}: seq {head.seq} it anchored is missing")]
    if found != head.hash:
        return [Problem(seq=head.seq, reason=f"{since}: hash at seq {head.seq} is {found[:16]}…, "
                                             f"the checkpoint signed {head.hash[:16]}…")]
    return []


def newest_per_session(genuine: Sequence[Checkpoint]) -> dict[str, Checkpoint]:
    newest: dict[str, Checkpoint] = {}
    for cp in sorted(genuine, key=lambda c: c.created_at):
        newest.update(dict.fromkeys(cp.heads, cp))
    return newest


def signed_cut(session_id: str, cut: Cut) -> SignedCut:
    """A retention cut as a signed statement names it: only a cut signed so excuses the seqs it dropped."""
    return SignedCut(range_from=cut.range_from, range_to=cut.range_to, session_id=session_id, seq=cut.seq,
                     hash=cut.hash)


def signed_head_problems(session_id: str, evidence: Evidence, hash_at: dict[int, str]) -> list[Problem]:
    """The chain still holds, at every seq a genuine signed checkpoint named for the session,
    the hash signed there: each distinct head once, named by the newest checkpoint signing it.

    Every one, not only the newest: a newest head that a signer was made to sign over a
    rewrite or a cut tail agrees with the rewritten chain; an older one does not.
    """
    problems = []
    for head, signed in evidence.signed_heads(session_id):
        found = hash_at.get(head.seq)
        since = f"rewritten since signed checkpoint {signed.label}"
        if found is None:
            problems.append(Problem(seq=head.seq, reason=f"{since}: seq {head.seq} it anchored is missing"))
        elif found != head.hash:
            problems.append(Problem(seq=head.seq, reason=f"{since}: hash at seq {head.seq} is {found[:16]}…, "
                                                         f"the checkpoint signed {head.hash[:16]}…"))
    return problems
