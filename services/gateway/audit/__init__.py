"""Audit reads across the sessions of a tenant, and the access log of who ran them.

`query` turns what an auditor asked into SQL and pages it by a keyset cursor (pure);
`export` writes the CSV form of an export; `store` runs the queries in the tenant's
transaction and also keeps the access log, the tenant's model cost and its retention window.
The HTTP side is `routes/audit.py` and `shapes/audit.py`.

Audit reads see deleted sessions too: deletion hides a session from its users, not from
the evidence.
"""
