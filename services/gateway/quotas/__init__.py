"""Quotas per tenant (issue 34): set by the tenant's admin, kept with every change, and the
rate quotas admitted at the HTTP edge.

`rules` is pure (the quotas' names, the windows, which a command counts against, what applies
to a tenant, the `Retry-After` of a refusal); `store`'s `QuotaStore` holds the SQL (the quota
row, its change log, the shared count); `gate`'s `QuotaGate` is what the dispatcher asks
before a command goes to Kafka. The HTTP side is `routes/quotas.py` and `shapes/quotas.py`,
the metric of refusals `metrics.py`, the defaults `settings.py`.

Running sessions are held by the brains (their `turn_gate.py`), tool calls in flight by the
runners and tokens per day by the brains (their `tenant_quotas.py`), from the same rows.
Commands produced straight to `wakeline.inbox` are not counted here.
"""
