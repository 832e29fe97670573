"""Wakeline shared library: events, commands, fold, topics, Kafka and Postgres I/O, settings."""
