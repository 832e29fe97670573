"""In-process stand-ins for external services that tests must never reach."""
