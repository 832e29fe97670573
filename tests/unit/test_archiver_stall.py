from wakeline_archiver.app import StallWatch


def test_stall_is_reported_only_when_records_wait_and_nothing_moves_for_the_limit():
    watch = StallWatch(limit=60)
    assert not watch.stalled(done=10, waiting=5, now=0)
    assert not watch.stalled(done=10, waiting=5, now=59)
    assert watch.stalled(done=10, waiting=5, now=61)


def test_progress_or_an_empty_backlog_resets_the_clock():
    watch = StallWatch(limit=60)
    watch.stalled(done=10, waiting=5, now=0)
    assert not watch.stalled(done=11, waiting=5, now=100)  # moved
    assert not watch.stalled(done=11, waiting=0, now=200)  # nothing to do is not a stall
    assert not watch.stalled(done=11, waiting=3, now=230)
    assert watch.stalled(done=11, waiting=3, now=300)
