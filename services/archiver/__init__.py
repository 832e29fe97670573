"""The archiver: projects `wakeline.events` and `wakeline.dead-letter` into Postgres.

Every event is stored exactly once (idempotent on `(session_id, seq)`), the `sessions`
projection moves forward with it, and the Kafka offsets are stored in the same
transaction. A session whose events cannot be stored is parked (`archiver_quarantine`)
and its records dead-lettered; every other session carries on. A database or broker
restart is retried, never a reason to stop. faust-streaming consumes (`stream.py`); `app.run` is
the entry point.
"""
