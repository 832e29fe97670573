"""Server-sent events: `Frame`s out of the lines of a `text/event-stream` body.

Comment lines (`: heartbeat`) come out as frames of kind `comment` with no data, so a
reader blocked on a quiet stream still wakes up to check whether it should stop.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Frame:
    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def is_comment(self) -> bool:
        return self.event == "comment"


class FrameParser:
    """Feed it lines (without their line ends); it hands back each frame as it completes."""

    def __init__(self) -> None:
        self._id: str | None = None
        self._event = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> Frame | None:
        if not line:
            frame = Frame(self._event, "\n".join(self._data), self._id) if self._data else None
            self._id, self._event, self._data = None, "message", []
            return frame
        if line.startswith(":"):
            return Frame("comment", "")
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


def parse_frames(lines: Iterable[str]) -> Iterator[Frame]:
    """Every data frame of `lines`, comments left out."""
    parser = FrameParser()
    for line in lines:
        frame = parser.feed(line)
        if frame is not None and not frame.is_comment:
            yield frame
