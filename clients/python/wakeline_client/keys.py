"""The API key's shape (`wkl_<key_id>_<secret>`, made by `wakeline keys create`) and its header."""

from __future__ import annotations

import re

KEY = re.compile(r"^wkl_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$")


def auth_headers(api_key: str | None) -> dict[str, str]:
    if api_key is None:
        return {}
    if not KEY.fullmatch(api_key):
        raise ValueError("not a Wakeline API key: expected wkl_<16 hex>_<43 characters> (wakeline keys create)")
    return {"Authorization": f"Bearer {api_key}"}
