"""The archiver's settings (env prefix `WAKELINE_`, e.g. `WAKELINE_ARCHIVER_GROUP`).

Fields are prefixed `archiver_` so that one environment can configure every service
without one's `group_id` leaking into another's.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from wakeline.storage.archive_position import ARCHIVER_GROUP
from wakeline.runtime.settings import CommonSettings


class ArchiverSettings(CommonSettings):
    kafka_username: str = "archiver"
    # The Kafka consumer group, the faust app id and `archiver_offsets.consumer_group`
    # (others read how far the archive reaches through `wakeline.storage.archive_position`).
    archiver_group: str = ARCHIVER_GROUP
    # The most records one transaction takes. The consumer's fetch loop (`transport.py`)
    # hands over what arrived within the window, so batches are small when the archive
    # keeps up and grow to this under a backlog, where fewer, larger transactions (one
    # commit, one look-up per batch) archive faster (issue 10: docs/history/benchmarks.md).
    archiver_batch_size: int = Field(default=5000, ge=1, le=10_000)
    # How long the fetch loop gathers records after the first before it hands over a smaller
    # batch. Each batch is a transaction of about a dozen statements whatever its size, so
    # between a trickle and a backlog the window sets what a step's events cost: at 100
    # sessions 0.25 s against 0.05 s took the archiver 0.85 -> 0.59 ms and Postgres 0.78 ->
    # 0.50 ms of CPU per tool step, the machine 5.8 -> 5.0 ms (issue 35, docs/benchmarks.md).
    # A record a caller waits to read back (a create's, a fork's, a delete's outcome: the
    # brain marks it, `topics.ARCHIVE_NOW_HEADER`) ends the gathering at once, so those answers
    # do not wait for the window; at 0.2 s without that, `POST /v1/sessions` took 247-252 ms
    # p50 against 91-96 ms at 0.05 s (2026-12-01). Other reads of the archive (transcripts,
    # audit) see a step's events up to this much later. Under a backlog, batches fill to the
    # size anyway.
    archiver_batch_window_s: float = Field(default=0.25, gt=0, le=10)
    # How long the broker may hold a fetch that finds nothing new. faust asks for 1.5 s, and
    # aiokafka sends a node's next fetch only when its last one returned, leaving out the
    # partitions whose records still wait in its buffer: behind a backlog, a fetch of
    # partitions already read to their end held every other partition's next records that
    # long (the lanes idle ~0.5 s at a time). Under a 40,000-event backlog 1,500 / 100 / 10 ms
    # archived 10.7k / 15.6k / 15.2k events/s (`bench.archiver_ab`, docs/benchmarks.md); an
    # idle archiver's polls are what it pays, 10 a second at 100 ms.
    archiver_fetch_max_wait_ms: int = Field(default=100, ge=1, le=1500)
    # faust's datadir; no tables or RocksDB live there, only faust's own bookkeeping.
    archiver_data_dir: Path = Path(".data/archiver")
    archiver_lag_log_interval_s: float = Field(default=30.0, gt=0)
    # No progress for this long while events wait: exit non-zero rather than look alive.
    archiver_stall_exit_s: float = Field(default=120.0, gt=0)
    # How many partitions' batches are stored at once, each in its own transaction (a
    # partition's own batches always one after another). One waits on Postgres (its CPU,
    # its index pages coming in from disk) while another runs its Python. Under a backlog
    # of 40,000 events, 1 / 2 / 3 / 4 / 6 stored 4.9k / 3.9k / 6.6-7.7k / 10.8k / 8.6k ev/s
    # (medians, `bench.archiver_ab`, docs/history/benchmarks.md). Each takes a pool connection. Per
    # projected topic: the dead-letter topic's batches have as many lanes again.
    archiver_concurrent_batches: int = Field(default=4, ge=1, le=16)
    archiver_pool_size: int = Field(default=4, ge=2)
    # Kafka's copy of the archive's offsets (for tooling, such as lag in `kafka-consumer-groups`:
    # the archive's own are in Postgres, committed with each batch) is committed about this
    # often, not behind every batch: each commit is a broker request and a write to its offsets topic.
    archiver_commit_every_s: float = Field(default=1.0, ge=0, le=60)
    # How soon a dead archiver's partitions go to another: a member that stops
    # heartbeating is dropped from the group after this long (the broker's minimum is 6 s).
    archiver_session_timeout_s: float = Field(default=10.0, ge=6, le=40)
