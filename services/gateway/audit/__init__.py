"""Audit reads across the sessions of a tenant, and the access log of who ran them.

`query` holds what an auditor asked and the keyset cursor that pages it (pure); `export`
writes the CSV form of an export; `store`'s `AuditStore` is the audit read model
(`read_model/audit.py`, which turns a query into SQL on `events` and `sessions` and runs it in
the tenant's transaction, and sums the tenant's model cost) plus the access log and the
tenant's retention window. The HTTP side is `routes/audit.py` and `shapes/audit.py`.

Audit reads see deleted sessions too: deletion hides a session from its users, not from
the evidence.
"""
