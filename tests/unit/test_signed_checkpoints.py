"""Ed25519 checkpoints and their three witnesses, without I/O: the public key alone tells a
genuine statement from a forged one, and cross_check names the checkpoint a missing or
altered copy breaks at."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wakeline.evidence import merkle
from wakeline.evidence.heads import Head
from wakeline.evidence.proofs import InclusionProof, build_proof, check_proof
from wakeline.evidence.cross_check import cross_check
from wakeline.evidence.signed_checkpoints import Envelope, SignedCut, guard_heads, new_statement, sign_statement
from wakeline.evidence.signing import SeedSigner, file_signer, fingerprint, parse_public_key, pinned, secret_signer

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


# -- a session's signed head from one statement to the next -----------------------------------

def statements(*heads: dict[str, Head], cuts: dict[int, tuple[SignedCut, ...]] | None = None) -> list[Envelope]:
    out: list[Envelope] = []
    for i, h in enumerate(heads):
        out.append(new_statement(SIGNER, "t", h, previous=out[-1] if out else None,
                                 created_at=T0 + timedelta(minutes=i), through=T0, cuts=(cuts or {}).get(i, ())))
    return out


def checked(envelopes: list[Envelope], heads: list[dict[str, Head]]):
    pg = list(zip(envelopes, heads))
    return cross_check(SIGNER.public_key(), "t", pg, list(envelopes), list(envelopes))


def test_genuine_statements_whose_heads_for_a_session_go_back_or_change_are_named() -> None:
    # The audit's case: three genuine statements, heads (6,a), (6,b), (4,c) for one session.
    heads = [{"s": Head(seq=6, hash="a" * 64)}, {"s": Head(seq=6, hash="b" * 64)}, {"s": Head(seq=4, hash="c" * 64)}]
    envelopes = statements(*heads)
    evidence = checked(envelopes, heads)
    one, two, three = (f"#{n} {e.parsed().id}" for n, e in enumerate(envelopes, start=1))
    assert reasons(evidence) == [
        f"checkpoint {two} contradicts checkpoint {one}: session s at seq 6 has hash {'b' * 16}…, {'a' * 16}… "
        "was signed: rewritten",
        f"checkpoint {three} contradicts checkpoint {two}: session s went back from seq 6 to seq 4: its tail was cut"]
    assert [(h.seq, g.statement.number) for h, g in evidence.signed_heads("s")] == [(4, 3), (6, 1), (6, 2)]


def test_heads_that_move_forward_or_a_session_a_signed_cut_covers_going_away_are_not_problems() -> None:
    cut = SignedCut(range_from=T0 - timedelta(days=60), range_to=T0 - timedelta(days=30), session_id="s", seq=6,
                    hash="a" * 64)
    heads = [{"s": Head(seq=6, hash="a" * 64), "u": Head(seq=1, hash="d" * 64)},
             {"s": Head(seq=6, hash="a" * 64), "u": Head(seq=3, hash="e" * 64)}, {"u": Head(seq=3, hash="e" * 64)}]
    evidence = checked(statements(*heads, cuts={2: (cut,)}), heads)
    assert reasons(evidence) == []
    assert [(h.seq, g.statement.number) for h, g in evidence.signed_heads("s")] == [(6, 2)]
    gone = checked(statements(*heads), heads)  # the same, without the cut
    assert [r.split(": ", 1)[1] for r in reasons(gone)] == [
        "session s has no head now, and no signed retention cut covers seq 6 that was signed"]


def test_the_signer_guard_refuses_a_head_that_is_not_a_continuation_and_keeps_the_signed_one() -> None:
    signed = {"same": Head(seq=6, hash="a" * 64), "rewritten": Head(seq=6, hash="a" * 64),
              "cut": Head(seq=6, hash="a" * 64), "moved": Head(seq=6, hash="a" * 64),
              "moved-over": Head(seq=6, hash="a" * 64), "gone": Head(seq=2, hash="a" * 64),
              "retained": Head(seq=2, hash="a" * 64)}
    found = {"same": Head(seq=6, hash="a" * 64), "rewritten": Head(seq=6, hash="b" * 64),
             "cut": Head(seq=4, hash="c" * 64), "moved": Head(seq=9, hash="d" * 64),
             "moved-over": Head(seq=9, hash="e" * 64), "new": Head(seq=1, hash="f" * 64)}
    held = {"moved": "a" * 64, "moved-over": "9" * 64}
    cut = SignedCut(range_from=T0, range_to=T0, session_id="retained", seq=2, hash="a" * 64)
    heads, refused = guard_heads(signed, found, held, [cut])
    assert heads == {**found, "rewritten": signed["rewritten"], "cut": signed["cut"],
                     "moved-over": signed["moved-over"], "gone": signed["gone"]}
    assert [(r.session_id, r.found) for r in refused] == [
        ("cut", found["cut"]), ("gone", None), ("moved-over", found["moved-over"]),
        ("rewritten", found["rewritten"])]
    assert [r.why for r in refused] == [
        "session cut went back from seq 6 to seq 4: its tail was cut",
        "session gone has no head now, and no signed retention cut covers seq 2 that was signed",
        f"session moved-over moved on to seq 9, but holds hash {'9' * 16}… at seq 6 where {'a' * 16}… was "
        "signed: rewritten",
        f"session rewritten at seq 6 has hash {'b' * 16}…, {'a' * 16}… was signed: rewritten"]
    assert guard_heads({}, found, {}, []) == (found, ())  # nothing signed yet: every head is new
