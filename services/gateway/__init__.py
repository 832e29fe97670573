"""The gateway: Wakeline's HTTP face (FastAPI) and the `wakeline` command line.

It writes commands to `wakeline.inbox` and reads sessions and events from Postgres; it
never writes an event. `create_app(settings)` in `app.py` is the composition root.
"""
