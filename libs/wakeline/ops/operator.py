"""The operator commands of the installed package, as sub-commands of `wakeline`.

`wakeline migrate`, `wakeline pack-months`, `wakeline topics [--fix]`, `wakeline acls`, `wakeline checkpoints write`
and `wakeline verify-direct` talk to Postgres or Kafka directly (not to the gateway), each as
the module behind it, which parses the rest of the command line; `python -m wakeline.<module>`
still works. `verify-direct` is the operator's side of `wakeline verify`: the same chains,
recomputed from the rows without the gateway, and the signer's three witnesses (Postgres, the
topic, the file sink) cross-checked under its public key, which needs the operator's files.
"""

from __future__ import annotations

from typing import Callable

from wakeline.ops import admin, closed_months
from wakeline.evidence import checkpoints, verify
from wakeline.storage import migrate

# (sub-command, help, the function taking the remaining arguments and returning the exit code)
COMMANDS: tuple[tuple[str, str, Callable[[list[str]], int]], ...] = (
    ("migrate", "apply the SQL migrations shipped in the package (as the schema owner)", migrate.main),
    ("pack-months", "rebuild the indexes of months that have closed, every page full (as the schema owner)",
     closed_months.main),
    ("topics", "create the <prefix>.* topics; --fix sets retention and min ISR of existing ones (as admin)",
     lambda rest: admin.main(["topics", *rest])),
    ("acls", "create each service principal's Kafka ACLs on the <prefix> names (as admin)",
     lambda rest: admin.main(["acls", *rest])),
    ("checkpoints", "write signed checkpoints of every chain head: checkpoints write --tenant T",
     checkpoints.main),
    ("verify-direct", "recompute chains from Postgres and cross-check the signer's witnesses: "
     "verify-direct SID|--all --tenant T [--proof]", verify.main),
)
