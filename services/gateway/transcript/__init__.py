"""A session's transcript as entries, Markdown or self-contained HTML. Pure functions.

Markers are skipped. Everything shown is content from the log, and the log holds
untrusted content (tool output, file text, model replies), so the HTML escapes every
piece of it, attributes included, renders no link or image from it, runs no script, and
carries a CSP that forbids fetching anything. Markdown escapes what would make raw HTML
or links, and fences tool input and output as code.

`entries` turns events into `Entry`s (and is the JSON form); `markdown` and `html` render
them. The route is `GET /v1/sessions/{id}/transcript` (routes/reads.py).
"""
