"""`python -m wakeline.ops.keys create|revoke|list` (also `wakeline keys ...`): API keys, as
the schema owner. What a key is and how the gateway checks one: `wakeline.storage.api_keys`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import asyncpg

from wakeline.runtime.settings import AdminSettings
from wakeline.storage.api_keys import ROLES, create, listing, parse_key, revoke


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wakeline keys", description="API keys (run as the schema owner)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("create", help="create a key; prints it once on stdout")
    p.add_argument("--tenant", required=True)
    p.add_argument("--principal", required=True)
    p.add_argument("--role", required=True, choices=ROLES)
    p.add_argument("--note")
    p = sub.add_parser("revoke", help="revoke a key by its id (or the key itself)")
    p.add_argument("key")
    p = sub.add_parser("list", help="ids, principals and roles (never secrets)")
    p.add_argument("--tenant")
    return parser


async def _run(args: argparse.Namespace, dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        if args.command == "create":
            key, key_id = await create(conn, args.tenant, args.principal, args.role, args.note)
            print(key)
            print(f"keys: created {key_id} for {args.role} {args.principal} in tenant {args.tenant}; "
                  "the key is shown only now", file=sys.stderr)
        elif args.command == "revoke":
            parsed = parse_key(args.key)
            key_id = parsed.key_id if parsed else args.key
            print(f"keys: {'revoked' if await revoke(conn, key_id) else 'already revoked'}: {key_id}",
                  file=sys.stderr)
        else:
            for entry in await listing(conn, args.tenant):
                print(json.dumps(entry))
    finally:
        await conn.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(_run(args, AdminSettings().postgres_admin_dsn))
    except (ValueError, LookupError, OSError, asyncpg.PostgresError) as exc:
        print(f"keys: failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
