"""The file sink witness: one append-only JSONL file of envelopes per tenant, under a
directory that can be another machine's mount."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from wakeline.evidence.cross_check import Problem
from wakeline.evidence.signed_checkpoints import Envelope


def sink_path(directory: Path, tenant: str) -> Path:
    # quote() leaves no "/" in the name, so a tenant cannot point outside `directory`.
    return directory / f"{quote(tenant, safe='')}.jsonl"


def append_sink(directory: Path, tenant: str, envelope: Envelope) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(sink_path(directory, tenant), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (envelope.model_dump_json() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_sink(directory: Path, tenant: str) -> tuple[list[Envelope], list[Problem]]:
    """The sink's envelopes, and a problem per line that is not one (a cut line, a rewrite)."""
    path = sink_path(directory, tenant)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return [], []
    found, problems = [], []
    for number, line in enumerate(lines, start=1):
        try:
            found.append(Envelope.model_validate_json(line))
        except ValueError:
            problems.append(Problem(checkpoint=None, reason=f"the sink {path}, line {number}: not a signed checkpoint"))
    return found, problems
