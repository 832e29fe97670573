"""Checkpoint signatures: only the key holder can make one that verifies, and verify compares
a session's stored chain with the newest genuine checkpoint naming it."""

from __future__ import annotations

import stat
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from wakeline.evidence.checkpoints import (
    Checkpoint, append_anchor, load_key, new_checkpoint, read_anchor, sign, signature_valid,
)
from wakeline.evidence.heads import Head
from wakeline.evidence.verify import checkpoint_problems

KEY = bytes(range(32))
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
SID = "sess-1"


def checkpoint(seq: int = 6, hash_: str = "a" * 64, at: datetime = T0, key: bytes = KEY) -> Checkpoint:
    return new_checkpoint(key, "tenant-a", {SID: Head(seq=seq, hash=hash_), "sess-2": Head(seq=1, hash="b" * 64)}, at)


def test_a_signed_checkpoint_verifies_with_its_key() -> None:
    assert signature_valid(KEY, checkpoint())


def test_a_checkpoint_does_not_verify_under_another_key() -> None:
    assert not signature_valid(bytes(32), checkpoint())


def test_changing_any_signed_field_breaks_the_signature() -> None:
    original = checkpoint()
    forged = [
        original.model_copy(update={"heads": {**original.heads, SID: Head(seq=6, hash="c" * 64)}}),
        original.model_copy(update={"heads": {SID: original.heads[SID]}}),
        original.model_copy(update={"tenant": "tenant-b"}),
        original.model_copy(update={"created_at": T0 + timedelta(microseconds=1)}),
        original.model_copy(update={"id": uuid.UUID(int=0)}),
    ]
    assert [signature_valid(KEY, c) for c in forged] == [False] * len(forged)


def test_signing_is_deterministic_and_independent_of_heads_order() -> None:
    one = checkpoint()
    reordered = one.model_copy(update={"heads": dict(reversed(list(one.heads.items())))})
    assert sign(KEY, reordered).signature == one.signature


def test_a_bad_anchor_line_is_an_error_not_skipped(tmp_path) -> None:
    append_anchor(tmp_path, checkpoint())
    with (tmp_path / "tenant-a.jsonl").open("a") as out:
        out.write('{"id": "not-a-uuid"}\n')
    with pytest.raises(ValueError, match=r"tenant-a\.jsonl:2: not a checkpoint"):
        read_anchor(tmp_path, "tenant-a")


def test_a_checkpoint_survives_the_anchor_file_round_trip(tmp_path) -> None:
    written = [checkpoint(), checkpoint(seq=7, at=T0 + timedelta(minutes=5))]
    for cp in written:
        append_anchor(tmp_path, cp)
    read = read_anchor(tmp_path, "tenant-a")
    assert read == written and all(signature_valid(KEY, c) for c in read)
    assert read_anchor(tmp_path, "tenant-other") == []


def test_anchor_file_names_cannot_escape_the_directory(tmp_path) -> None:
    cp = new_checkpoint(KEY, "../evil", {}, T0)
    append_anchor(tmp_path, cp)
    assert [p.parent for p in tmp_path.iterdir()] == [tmp_path]
    assert read_anchor(tmp_path, "../evil") == [cp]


def test_key_file_is_created_once_private_and_reused(tmp_path) -> None:
    path = tmp_path / "keys" / "checkpoint.key"
    assert load_key(path, create=False) is None
    key = load_key(path)
    assert key is not None and len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(path) == key == load_key(path, create=False)


def test_a_short_key_file_is_refused(tmp_path) -> None:
    path = tmp_path / "checkpoint.key"
    path.write_text("abcd\n")
    with pytest.raises(ValueError, match="expected 32 bytes"):
        load_key(path)


def test_chain_matching_the_newest_checkpoint_has_no_problems() -> None:
    older, newer = checkpoint(seq=3, hash_="3" * 64), checkpoint(seq=6, at=T0 + timedelta(hours=1))
    problems, used = checkpoint_problems(SID, [older, newer], [older, newer], KEY, {3: "3" * 64, 6: "a" * 64})
    assert (problems, used) == ([], newer.id)


def test_a_different_hash_at_the_checkpointed_seq_is_a_rewrite() -> None:
    cp = checkpoint()
    problems, _ = checkpoint_problems(SID, [cp], [cp], KEY, {6: "f" * 64})
    assert [(p.seq, p.reason.split(":")[0]) for p in problems] == [(6, f"rewritten since checkpoint {cp.id}")]


def test_a_missing_checkpointed_seq_is_a_rewrite() -> None:
    cp = checkpoint()
    problems, _ = checkpoint_problems(SID, [cp], [cp], KEY, {1: "x" * 64})
    assert len(problems) == 1 and "seq 6 it anchored is missing" in problems[0].reason


def test_a_forged_checkpoint_is_reported_and_not_trusted() -> None:
    genuine = checkpoint()
    forged = genuine.model_copy(update={"id": uuid.UUID(int=1), "created_at": T0 + timedelta(hours=1),
                                        "heads": {SID: Head(seq=6, hash="f" * 64)}})
    problems, used = checkpoint_problems(SID, [genuine, forged], [genuine], KEY, {6: "f" * 64})
    reasons = [p.reason for p in problems]
    assert used == genuine.id
    assert f"checkpoint {uuid.UUID(int=1)} is tampered: its signature does not verify" in reasons
    assert any(r.startswith(f"rewritten since checkpoint {genuine.id}") for r in reasons)


def test_a_checkpoint_removed_or_altered_in_the_database_is_caught_by_the_anchor_file() -> None:
    kept, removed = checkpoint(), checkpoint(seq=6, at=T0 + timedelta(hours=1))
    altered = kept.model_copy(update={"heads": {SID: Head(seq=6, hash="f" * 64)}})
    problems, _ = checkpoint_problems(SID, [altered], [kept, removed], KEY, {6: "a" * 64})
    reasons = {p.reason for p in problems}
    assert f"checkpoint {removed.id} is in the anchor file but missing from the database" in reasons
    assert f"checkpoint {kept.id} in the database differs from the anchor file" in reasons
    assert f"checkpoint {kept.id} is tampered: its signature does not verify" in reasons


def test_without_a_key_signatures_are_not_checked_but_heads_still_are() -> None:
    cp = checkpoint(key=bytes(32))
    problems, used = checkpoint_problems(SID, [cp], [], None, {6: "f" * 64})
    assert used == cp.id and [p.seq for p in problems] == [6]
