"""The runner: executes tool calls from `wakeline.tool-calls` in a per-session sandbox.

Layout: `settings` (RunnerSettings), `tools` (result models and failures; the inputs and
`tool_schemas()` are `wakeline.contract.tools`), `confinement` + `files` (file tools), `isolation`
+ `wrapper` + `sandbox` (bash, detached and adoptable), `records` (per-call records on
disk), `executor` (one request -> one result, idempotent by tool_call_id), `keyed` +
`publish` + `loop` (the Kafka loop, `ToolCallLoop`), `app` (wiring and `run`).
"""
