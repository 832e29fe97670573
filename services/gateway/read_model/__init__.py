"""The gateway's reads of the `events` and `sessions` tables beyond the `EventStore` interface
in `wakeline.storage`: each module one read model, and no other gateway module spells out SQL
on those tables.

- `sessions.py`: `SessionStore`, what the session routes read (the projection rows, a page
  of them with their model costs, forks, a session's events through the `EventStore`, the
  key and session of a path in one statement, verify and proofs).
- `audit.py`: `AuditReads`, the audit queries across a tenant's sessions (events, the
  sessions they touch, model cost) and the SQL they run; `audit/store.py`'s `AuditStore`
  adds the access log and the retention window to them.
- `pool_calls.py`: the tool calls waiting for a harness that the pool may lease (`pool.py`
  keeps the leases, `tool_call_leases`).

Why one place: a change to either table (a column, an index, a partition bound) is checked
against every statement that reads it here and in `wakeline.storage`, not hunted for across
the routes; `tests/unit/test_import_rules.py` fails when such SQL turns up elsewhere.
Nothing here writes, and every read of a tenant's rows is under row-level security (a
tenant transaction, or a definer function that sets the tenant itself, as `session_row`).
"""
