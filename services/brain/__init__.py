"""The brain: the agent loop and the single writer of `wakeline.events` for its partitions."""
