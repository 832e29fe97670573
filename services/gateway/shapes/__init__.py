"""HTTP shapes: `XCreate` is what a caller sends, `XPublic` what it gets, `XsPublic` a page.

Event bodies are the canonical `wakeline.contract.events` models, so the OpenAPI schema at
/docs documents each event type exactly as it is stored.

One module per concern, named as the routes that use them are:
`base` (what every query and body derives from), `sessions` (a session created, forked,
listed, shown), `commands` (a message, a tool result, a denial, and what became of a
command), `reads` (a session's events, replay and inclusion proof), `audit` (queries across
sessions, the access log, the tenant's cost), `tenant` (its retention window), `me` (who a
key is). Response models of one computation live beside it (`cost.py`, `replay_judge.py`).
"""
