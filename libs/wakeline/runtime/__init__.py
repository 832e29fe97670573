"""The runtime every process shares, below everything else: settings, logs, metrics
plumbing, tracing, the process lifecycle (`serve`), and what counts as weather (a transient
infrastructure failure). Imports no other wakeline package."""
