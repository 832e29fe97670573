"""Benchmarks that print figures as JSON lines: `make bench` (see docs/benchmarks.md).

Every benchmark runs under the benchmarks' own names unless told others: topics, groups
and transactional ids prefixed `wakeline-bench`, the database `wakeline_bench` (what
`make bench` exports and `make bench-up` creates), so the sessions a benchmark creates never
show in what `make demo` shows, run by `make bench` or by hand (`python -m bench.…`). Set
here, before any benchmark imports `wakeline.contract.topics`, which reads the prefix once;
under pytest the suite's own names (tests/conftest.py) are already set and stay.
"""

import os

os.environ.setdefault("WAKELINE_TOPIC_PREFIX", "wakeline-bench")
os.environ.setdefault("WAKELINE_POSTGRES_DATABASE", "wakeline_bench")
