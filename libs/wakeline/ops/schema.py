"""`python -m wakeline.ops.schema`: writes docs/commands.schema.json from the command models.

The file is generated, never edited: a test fails when it drifts from the models.
"""

from __future__ import annotations

import json
import sys
from typing import Any
from pathlib import Path

from wakeline.contract.commands import COMMAND_ADAPTER

DEFAULT_PATH = Path("docs/commands.schema.json")


def command_schema() -> dict[str, Any]:
    schema = COMMAND_ADAPTER.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Wakeline command (a record value on wakeline.inbox, keyed by session_id)"
    return schema


def render() -> str:
    return json.dumps(command_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else DEFAULT_PATH
    path.write_text(render())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
