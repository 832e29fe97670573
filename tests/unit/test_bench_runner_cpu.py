"""bench.runner_cpu's sampler and per-call split, and the process-tree CPU it reads."""

import os
import signal
import subprocess
import sys

from bench.runner_cpu import TICK_S, BusySampler, _cpu_ticks, per_call
from bench.scale import cpu_s, tree_cpu_s


def test_the_mean_covers_only_samples_inside_the_window_after_its_first_interval():
    sampler = BusySampler(every_s=0.5)
    sampler.samples = [(9.0, 0.1), (10.4, 0.2), (10.6, 0.8), (11.0, 0.6), (12.1, 0.9)]
    # 10.4 started before the window opened at 10.0 (its interval began at 9.9): left out
    assert sampler.mean_between(10.0, 11.0) == (0.7, 2)
    busy, n = sampler.mean_between(20.0, 21.0)
    assert n == 0 and busy != busy  # NaN: no sample, not a made-up 0


def test_proc_stat_ticks_count_idle_within_all():
    total, idle = _cpu_ticks()
    assert 0 <= idle <= total and total > 0


def test_the_machine_busy_seconds_are_the_ticks_between_the_first_and_last_sample_inside():
    sampler = BusySampler(every_s=0.5)
    ticks = round(1 / TICK_S)  # ticks per second
    sampler.busy_ticks = [(9.0, 0), (10.1, ticks), (10.6, 3 * ticks), (11.2, 10 * ticks)]
    assert sampler.busy_s_between(10.0, 11.0) == 2.0  # 10.1 -> 10.6 only
    assert sampler.busy_s_between(20.0, 21.0) != sampler.busy_s_between(20.0, 21.0)  # NaN, not 0


def test_per_call_splits_the_machine_into_services_and_the_rest():
    figures = per_call({"brain": 0.5, "archiver": 0.25, "runners": 1.0}, machine_s=4.0, calls=250)
    assert figures == {"brain": 2.0, "archiver": 1.0, "runners": 4.0, "rest": 9.0}


def test_a_process_tree_counts_its_live_descendants_cpu():
    busy = ("import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "print(1, flush=True); time.sleep(30)")
    parent = subprocess.Popen(["sh", "-c", f'{sys.executable} -c "{busy}"; :'], stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"1\n"  # the grandchild has burnt 0.3 s
        assert cpu_s(parent.pid) < 0.1  # nothing waited for yet: its own counters miss it
        assert tree_cpu_s(parent.pid) >= 0.25
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the grandchild too
        parent.wait()
