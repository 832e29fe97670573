"""Ed25519 checkpoints and their three witnesses, without I/O: the public key alone tells a
genuine statement from a forged one, and cross_check names the checkpoint a missing or
altered copy breaks at."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wakeline import merkle
from wakeline.checkpoints import Head
from wakeline.proofs import InclusionProof, build_proof, check_proof
from wakeline.signed_checkpoints import Envelope, cross_check, new_statement, sign_statement
from wakeline.signing import SeedSigner, file_signer, fingerprint, parse_public_key, pinned, secret_signer

SIGNER = SeedSigner(bytes(range(32)))
MALLORY = SeedSigner(bytes(range(1, 33)))
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
HEADS = {"s-1": Head(seq=6, hash="a" * 64), "s-2": Head(seq=2, hash="b" * 64), "s-3": Head(seq=9, hash="c" * 64)}


def chain(n: int, signer: SeedSigner = SIGNER) -> list[Envelope]:
    out: list[Envelope] = []
    for i in range(n):
        heads = {**HEADS, "s-1": Head(seq=6 + i, hash=f"{i:064x}")}
        out.append(new_statement(signer, "t", heads, previous=out[-1] if out else None,
                                 created_at=T0 + timedelta(minutes=i), through=T0))
    return out


def heads_of(i: int) -> dict[str, Head]:
    return {**HEADS, "s-1": Head(seq=6 + i, hash=f"{i:064x}")}


def everywhere(envelopes: list[Envelope]) -> tuple[list, list, list]:
    return [(e, heads_of(i)) for i, e in enumerate(envelopes)], list(envelopes), list(envelopes)


def reasons(evidence) -> list[str]:
    return [p.reason for p in evidence.problems]


def test_three_agreeing_witnesses_give_genuine_checkpoints_with_checked_heads() -> None:
    envelopes = chain(3)
    evidence = cross_check(SIGNER.public_key(), "t", *everywhere(envelopes))
    assert reasons(evidence) == []
    assert [g.statement.number for g in evidence.genuine] == [1, 2, 3]
    assert evidence.newest_with("s-1").heads["s-1"] == Head(seq=8, hash=f"{2:064x}")


def test_a_statement_signed_by_another_key_is_refused_in_each_witness() -> None:
    envelopes = chain(2)
    forged = sign_statement(MALLORY, envelopes[1].parsed())
    pg, topic, sink = everywhere(envelopes)
    pg[1], topic[1] = (forged, heads_of(1)), forged
    evidence = cross_check(SIGNER.public_key(), "t", pg, topic, sink)
    label = f"#2 {envelopes[1].parsed().id}"
    assert f"checkpoint {label} in the postgres: its signature does not verify (forged or altered)" in reasons(evidence)
    assert f"checkpoint {label} in the topic: its signature does not verify (forged or altered)" in reasons(evidence)
    assert f"checkpoint {label} is missing from the postgres and the topic (present in the sink)" in reasons(evidence)


def test_a_changed_byte_of_a_statement_breaks_its_signature() -> None:
    envelope = chain(1)[0]
    altered = envelope.model_copy(update={"statement": envelope.statement.replace('"sessions":3', '"sessions":4')})
    assert altered.statement != envelope.statement
    evidence = cross_check(SIGNER.public_key(), "t", [], [altered], [envelope])
    assert any("in the topic: its signature does not verify" in r for r in reasons(evidence))


@pytest.mark.parametrize("witness", ["postgres", "topic", "sink"])
def test_a_checkpoint_one_witness_lacks_is_named(witness: str) -> None:
    envelopes = chain(3)
    pg, topic, sink = everywhere(envelopes)
    {"postgres": pg, "topic": topic, "sink": sink}[witness].pop(1)
    evidence = cross_check(SIGNER.public_key(), "t", pg, topic, sink)
    others = " and the ".join(w for w in ("postgres", "topic", "sink") if w != witness)
    assert reasons(evidence) == [f"checkpoint #2 {envelopes[1].parsed().id} is missing from the {witness} "
                                 f"(present in the {others})"]


def test_a_checkpoint_gone_from_all_three_is_named_by_its_successor() -> None:
    envelopes = chain(3)
    kept = [envelopes[0], envelopes[2]]
    evidence = cross_check(SIGNER.public_key(), "t", [(kept[0], heads_of(0)), (kept[1], heads_of(2))], kept, kept)
    assert reasons(evidence) == [f"checkpoint #2 missing from every witness: checkpoint #3 "
                                 f"{envelopes[2].parsed().id} follows it"]


def test_heads_in_postgres_that_do_not_hash_to_the_signed_root_are_named_and_not_used() -> None:
    envelopes = chain(2)
    pg, topic, sink = everywhere(envelopes)
    pg[1] = (envelopes[1], {**heads_of(1), "s-1": Head(seq=7, hash="f" * 64)})
    evidence = cross_check(SIGNER.public_key(), "t", pg, topic, sink)
    assert reasons(evidence) == [f"checkpoint #2 {envelopes[1].parsed().id}: the heads postgres holds do not "
                                 "hash to its signed root"]
    assert evidence.newest_with("s-1").statement.number == 1


def test_an_inclusion_proof_checks_with_the_public_key_alone() -> None:
    envelopes = chain(2)
    proof = build_proof(cross_check(SIGNER.public_key(), "t", *everywhere(envelopes)), "s-2")
    assert proof is not None and proof.head == HEADS["s-2"]
    again = InclusionProof.model_validate_json(proof.model_dump_json())  # as printed, as read back
    assert check_proof(again, SIGNER.public_key()) == []
    assert check_proof(again, MALLORY.public_key()) != []
    lied = again.model_copy(update={"head": Head(seq=3, hash="b" * 64)})
    assert any(p.startswith("the head and path lead to root") for p in check_proof(lied, SIGNER.public_key()))


def test_a_key_file_is_private_its_public_key_published_and_a_pin_refuses_another_key(tmp_path: Path) -> None:
    signer = file_signer(tmp_path / "k" / "signer.key", create=True)
    assert stat.S_IMODE((tmp_path / "k" / "signer.key").stat().st_mode) == 0o600
    published = parse_public_key((tmp_path / "k" / "signer.key.pub").read_text())
    assert published == signer.public_key() and file_signer(tmp_path / "k" / "signer.key").key_id == signer.key_id
    assert pinned(published, signer.key_id) == published
    with pytest.raises(ValueError, match="not the pinned"):
        pinned(MALLORY.public_key(), signer.key_id)
    assert secret_signer(bytes(range(32)).hex()).key_id == SIGNER.key_id == fingerprint(SIGNER.public_key())
    with pytest.raises(ValueError):
        secret_signer("00" * 31)


def test_the_root_signed_is_the_root_of_the_heads() -> None:
    assert chain(1)[0].parsed().root == merkle.root(heads_of(0))
