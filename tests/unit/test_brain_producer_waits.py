"""The partition producer's two waits: a refused first AddPartitionsToTxn is asked again after
`txn_concurrent_retry_ms` (aiokafka's module constant, which it reads at each retry), every
other retried request after `txn_retry_backoff_ms`. Building a producer connects nothing."""

from __future__ import annotations

import asyncio

import aiokafka.producer.sender as aiokafka_sender
from aiokafka.errors import ConcurrentTransactions

from wakeline_brain.app import partition_producer
from wakeline_brain.settings import BrainSettings


def test_each_wait_comes_from_its_own_setting(monkeypatch) -> None:
    monkeypatch.setattr(aiokafka_sender, "BACKOFF_OVERRIDE", aiokafka_sender.BACKOFF_OVERRIDE)  # restored after

    async def build():
        return partition_producer(BrainSettings(txn_concurrent_retry_ms=3, txn_retry_backoff_ms=40), 0)

    producer = asyncio.run(build())
    assert aiokafka_sender.BACKOFF_OVERRIDE == 0.003
    assert producer._producer._sender._retry_backoff == 0.04
    assert BrainSettings().txn_concurrent_retry_ms == 2 and BrainSettings().txn_retry_backoff_ms == 20


def test_aiokafka_still_waits_its_module_constant_after_a_refused_first_add_partitions() -> None:
    # What the setting relies on: the handler returns BACKOFF_OVERRIDE for this refusal when no
    # partition is in the transaction yet. An aiokafka that stops doing so fails here.
    class Manager:
        txn_partitions: set = set()

    class Sender:
        _retry_backoff = 0.5
        _txn_manager = Manager()

        def _coordinator_dead(self, kind) -> None:  # pragma: no cover - not this error
            raise AssertionError(kind)

    class Response:
        errors = [("wakeline.events", [(0, ConcurrentTransactions.errno)])]

    handler = aiokafka_sender.AddPartitionsToTxnHandler(Sender(), [])
    assert handler.handle_response(Response()) is aiokafka_sender.BACKOFF_OVERRIDE
