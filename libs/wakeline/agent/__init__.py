"""What the agent loop decides, pure: from a folded `SessionState` and an input (or a
model's reply) to the drafts the session records next. The model interface (`model`), the
request built from the log and when to compact it (`context`, `summary`, `memory`), the
session's own next step (`steps`), what an input does (`inputs`), a fork's opening
(`forking`), what a failed input leaves in the log (`parking`), and the replay check that
runs a recorded history through all of it (`replay_check`; `replay_command` is its program,
reading histories from Postgres). No clock, randomness, network or database in the
decisions: the brain (`wakeline_brain`) does the I/O around them, and the gateway judges a
history with the same code in-process. Imports storage, the log, the contract and the
runtime."""
