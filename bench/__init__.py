"""Benchmarks that print figures as JSON lines: `make bench` (see docs/benchmarks.md)."""
