"""The runner: executes tool calls from `wakeline.tool-calls` in a per-session sandbox.

Layout: `settings` (RunnerSettings), `tools` (result models and failures; the inputs and
`tool_schemas()` are `wakeline.contract.tools`), `confinement` + `files` (file tools);
`isolation` (bubblewrap or nothing, probed at start) over `bwrap` (its command line),
`tool_etc` (the /etc a tool sees) and `cgroups` (per-session limits); `sandbox` (bash,
detached and adoptable) with `session_dirs` (a session's directories), `forkserver` +
`wrapper` (the detached supervisor), `call_lock` (waiting for it) and `outcome` (what it
left); `records` (per-call records on disk), `executor` (one request -> one result,
idempotent by tool_call_id), `keyed` + `publish` + `loop` (the Kafka loop, `ToolCallLoop`),
`metrics`, `app` (wiring and `run`).
"""
