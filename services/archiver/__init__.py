"""The archiver: projects `wakeline.events` and `wakeline.dead-letter` into Postgres.

Every event is stored exactly once (idempotent on `(session_id, seq)`), the `sessions`
projection moves forward with it, and the Kafka offsets are stored in the same
transaction. faust-streaming consumes; `service.run` is the entry point.
"""
