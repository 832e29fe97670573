"""deploy/credentials.sh: generated once, private, never regenerated, completed when short."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "credentials.sh"


def ensure(path: Path) -> str:
    env = {**os.environ, "WAKELINE_CREDENTIALS_FILE": str(path)}
    subprocess.run(["bash", str(SCRIPT), "ensure"], env=env, check=True, capture_output=True, timeout=30)
    return path.read_text()


def test_the_file_is_generated_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / "credentials.env"
    first = ensure(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "WAKELINE_KAFKA_PASSWORDS__BRAIN=" in first and "WAKELINE_POSTGRES_PASSWORDS__WAKELINE_OWNER=" in first
    assert ensure(path) == first  # never regenerated


def test_a_missing_variable_is_added_and_the_others_kept(tmp_path: Path) -> None:
    path = tmp_path / "credentials.env"
    path.write_text("WAKELINE_KAFKA_PASSWORDS__BRAIN=kept-as-it-was\n")
    after = ensure(path)
    assert "WAKELINE_KAFKA_PASSWORDS__BRAIN=kept-as-it-was\n" in after
    assert after.count("WAKELINE_KAFKA_PASSWORDS__BRAIN=") == 1
    assert "WAKELINE_KAFKA_PASSWORDS__RUNNER=" in after
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
