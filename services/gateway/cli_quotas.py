"""`wakeline quotas show|set`: the tenant's quotas over HTTP (`set` takes an admin key).

The key decides the tenant, as for every HTTP command; `--tenant` says which tenant the caller
means, and a key of another tenant is refused here before anything changes. `set` changes only
the quotas it is given (`default` puts one back to the gateway's default) and keeps the rest.
Neither can go above the tenant's ceiling (the gateway answers 422 `above_ceiling`): that is the
operator's, `wakeline quotas ceiling --tenant T ...`, which talks to Postgres as the schema owner,
not to the gateway (`wakeline.ops.quota_ceilings`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wakeline_client import Wakeline
from wakeline_client import operations as ops

from wakeline.ops import quota_ceilings

def add_parser(sub: Any) -> None:
    p = sub.add_parser("quotas", help="the tenant's quotas: show them, or set them (admin)")
    actions = p.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="the quotas that apply, the defaults and every change")
    show.add_argument("--tenant", help="refuse unless the key belongs to this tenant")
    put = actions.add_parser("set", help="set some of the tenant's quotas; the others stay as they are")
    put.add_argument("--tenant", required=True, help="the tenant meant; the key must belong to it")
    quota_ceilings.add_quota_flags(put)
    ceiling = actions.add_parser("ceiling", add_help=False,
                                 help="the operator's ceiling on a tenant's quotas (as the schema owner, not HTTP)")
    ceiling.set_defaults(direct=quota_ceilings.main)
    p.set_defaults(handler=quotas)


def quotas(client: Wakeline, args: argparse.Namespace) -> int:
    answer = client.http.json(ops.READ_QUOTAS)
    if args.tenant is not None and args.tenant != answer["tenant"]:
        print(f"wakeline: this key belongs to tenant {answer['tenant']!r}, not {args.tenant!r}: nothing changed "
              "(a key acts for its own tenant only)", file=sys.stderr)
        return 1
    if args.action == "set":
        given = quota_ceilings.given(args)
        if not given:
            print("wakeline: quotas set: name at least one quota (--commands-per-second N, ...)", file=sys.stderr)
            return 2
        answer = client.http.json(ops.SET_QUOTAS, body={**answer["own"], **given})
    print(json.dumps(answer, indent=2))
    return 0
