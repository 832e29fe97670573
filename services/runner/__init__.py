"""The runner: executes tool calls from `wakeline.tool-calls` in a per-session sandbox.

Layout: `settings` (RunnerSettings), `tools` (input/result models, `tool_schemas()`),
`confinement` + `files` (file tools), `isolation` + `wrapper` + `sandbox` (bash, detached
and adoptable), `records` (per-call records on disk), `executor` (one request -> one
result, idempotent by tool_call_id), `offsets` + `keyed` + `service` (the Kafka loop).
"""
