"""The published JSON Schema is the one the models generate, and it accepts what we accept."""

import json
from pathlib import Path

from wakeline.ops.schema import render

ROOT = Path(__file__).resolve().parents[2]


def test_published_command_schema_matches_the_models():
    assert (ROOT / "docs" / "commands.schema.json").read_text() == render(), \
        "docs/commands.schema.json is stale: run .venv/bin/python -m wakeline.ops.schema"


def test_schema_lists_every_command_type():
    schema = json.loads(render())
    kinds = set(schema["discriminator"]["mapping"])
    assert {"create_session", "post_message", "approve_tool_call", "deny_tool_call", "cancel_session",
            "wake_session", "delete_session", "take_over", "hand_back", "submit_tool_result"} == kinds
