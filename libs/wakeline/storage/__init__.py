"""Postgres: the connection pool bound to a tenant, the event store interface with its
Postgres and in-memory stores, the migrations (package data), API keys, fork lineage,
the archive's position and the retention cuts verify reads. Imports the log, the
contract and the runtime."""
