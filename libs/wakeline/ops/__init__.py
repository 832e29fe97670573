"""Operator programs on top of everything: topics and ACLs (`admin`, `kafka_acls`), API key
commands, retention, month packing, the command schema writer and `wakeline`'s operator
sub-commands. Each has its own `main()`; no service or library module imports one (the
`wakeline` command, `wakeline_gateway.cli`, dispatches to them)."""
