"""Kafka as the services use it: clients made one way (credentials, limits, transactions,
keyed sends, range reads) and the offset tracker for records that finish out of order.
Imports the contract and the runtime."""
