"""The session log as data: the hash chain, the pure fold from events to `SessionState`,
statuses, snapshots and the client calls still pending. Pure functions, no I/O. Imports
the contract and the runtime."""
