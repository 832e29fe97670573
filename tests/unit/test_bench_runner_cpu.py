"""bench.runner_cpu's sampler: the busy fraction it averages is the timed window's only."""

from bench.runner_cpu import BusySampler, _cpu_ticks


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
