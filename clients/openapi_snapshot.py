"""Writes the gateway's OpenAPI document to clients/openapi.json, which both clients are
generated from and checked against (tests/unit/test_client_openapi.py).

`python clients/openapi_snapshot.py` (from the checkout, in its venv). Building the document
needs no broker and no database: `create_app` opens neither until its lifespan runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent / "openapi.json"


def current_openapi() -> dict[str, Any]:
    from wakeline.runtime.settings import DEFAULT_TOPIC_PREFIX
    from wakeline.contract.topics import INBOX, names
    from wakeline_gateway.app import create_app
    from wakeline_gateway.settings import GatewaySettings

    document = create_app(GatewaySettings()).openapi()
    # The description names the inbox topic, whose prefix is this process's (the suite runs under
    # its own): the snapshot always says the default's, so it is the same wherever it is made.
    info = document["info"]
    info["description"] = info["description"].replace(INBOX, names(DEFAULT_TOPIC_PREFIX).inbox)
    return document


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    SNAPSHOT.write_text(render(current_openapi()), encoding="utf-8")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
