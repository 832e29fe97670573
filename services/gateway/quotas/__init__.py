"""Quotas per tenant (issue 34): set by the tenant's admin, kept with every change, and the
rate quotas admitted at the HTTP edge.

`rules` is pure (the quotas' names, the windows, which a command counts against, what applies
to a tenant, the `Retry-After` of a refusal); `store`'s `QuotaStore` holds the SQL (the quota
row, its change log, the shared count); `gate`'s `QuotaGate` is what the dispatcher asks
before a command goes to Kafka. The HTTP side is `routes/quotas.py` and `shapes/quotas.py`,
the metric of refusals `metrics.py`, the defaults `settings.py`.

Tool calls in flight are held by the runners and tokens per day by the brains, from the same
rows (the brain's `tenant_quotas.py`); running sessions is stored and shown, not enforced yet.
Commands produced straight to `wakeline.inbox` are not counted here.
"""
