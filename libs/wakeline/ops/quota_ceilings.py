"""`wakeline quotas ceiling --tenant T [--running-sessions N|default ...]`: the operator's ceiling
on a tenant's quotas (migration 0030), as the schema owner, never through an API key.

A tenant's admin sets its own quotas (`wakeline quotas set`, PUT /v1/quotas) but never above its
ceiling: the operator's value for the tenant, else the default (WAKELINE_QUOTA_*). What applies is
the lower of the two. This command changes only the ceilings it is given (`default`: back to the
default) and keeps the rest; without any, it only shows them. Either way it prints the tenant's
ceilings, its own values, and what applies after, computed with the defaults of this command's
environment (WAKELINE_QUOTA_*: give it the services' own). Every change is kept in
`tenant_quota_ceiling_changes`, which nobody can change or delete.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from typing import Any

import asyncpg

from wakeline.contract.quotas import QUOTA_NAMES, QuotaDefaults, ceilings_in_force, effective
from wakeline.runtime.settings import AdminSettings

_COLUMNS = ", ".join(QUOTA_NAMES)
UPSERT = (f"INSERT INTO tenant_quota_ceilings (tenant, {_COLUMNS}, set_by) "
          f"VALUES ($1, {', '.join(f'${n}' for n in range(2, len(QUOTA_NAMES) + 2))}, ${len(QUOTA_NAMES) + 2}) "
          "ON CONFLICT (tenant) DO UPDATE SET "
          + ", ".join(f"{c} = EXCLUDED.{c}" for c in (*QUOTA_NAMES, "set_by")) + ", set_at = now()")
CEILINGS = f"SELECT {_COLUMNS}, set_by, set_at FROM tenant_quota_ceilings WHERE tenant = $1"
OWN = f"SELECT {_COLUMNS} FROM tenant_quotas WHERE tenant = $1"


class CeilingSettings(AdminSettings, QuotaDefaults):
    """The owner's DSN and the defaults (WAKELINE_QUOTA_*) the services apply."""


def quota_value(text: str) -> int | None:
    """A positive whole number, or `default` (back to the default: for a ceiling, the default is
    the ceiling; for a tenant's own value, `wakeline quotas set`, the default applies)."""
    if text == "default":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1, nor `default`")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wakeline quotas ceiling",
                                description="the operator's ceiling on a tenant's quotas (as the schema owner)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--by", default=f"operator:{getpass.getuser()}", help="who sets it, kept with the change")
    add_quota_flags(p)
    return p


def add_quota_flags(p: argparse.ArgumentParser) -> None:
    """`--running-sessions N|default` and the four others; one not given is absent from the args."""
    for name in QUOTA_NAMES:
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=quota_value, default=argparse.SUPPRESS,
                       metavar="N|default")


def given(args: argparse.Namespace) -> dict[str, int | None]:
    """The quotas named on the command line (None: back to the default)."""
    return {name: getattr(args, name) for name in QUOTA_NAMES if hasattr(args, name)}


async def set_ceilings(conn: asyncpg.Connection, tenant: str, changes: dict[str, int | None],
                       by: str) -> dict[str, Any]:
    """Changes the ceilings named (the rest kept) in one transaction; returns the ceilings and the
    tenant's own values after. An empty `changes` only reads."""
    async with conn.transaction():
        await conn.execute("SELECT set_config('wakeline.tenant', $1, true)", tenant)
        current = await conn.fetchrow(CEILINGS + " FOR UPDATE", tenant)
        if changes:
            values = {name: (current[name] if current else None) for name in QUOTA_NAMES} | changes
            await conn.execute(UPSERT, tenant, *(values[name] for name in QUOTA_NAMES), by)
            current = await conn.fetchrow(CEILINGS, tenant)
        own = await conn.fetchrow(OWN, tenant)
    return {"ceilings": {name: current[name] if current else None for name in QUOTA_NAMES},
            "own": {name: own[name] if own else None for name in QUOTA_NAMES},
            "set_by": current["set_by"] if current else None,
            "set_at": current["set_at"].isoformat() if current else None}


def report(tenant: str, stored: dict[str, Any], defaults: dict[str, int | None]) -> dict[str, Any]:
    return {"tenant": tenant, "effective": effective(stored["own"], defaults, stored["ceilings"]),
            "ceilings_in_force": ceilings_in_force(stored["ceilings"], defaults), **stored, "defaults": defaults}


async def _run(args: argparse.Namespace, settings: CeilingSettings) -> int:
    conn = await asyncpg.connect(settings.postgres_admin_dsn)
    try:
        stored = await set_ceilings(conn, args.tenant, given(args), args.by)
    finally:
        await conn.close()
    print(json.dumps(report(args.tenant, stored, settings.quota_defaults()), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(_run(args, CeilingSettings()))
    except (ValueError, OSError, asyncpg.PostgresError) as exc:
        print(f"quotas ceiling: failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
