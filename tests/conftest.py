"""Every test process is Kafka's super user `admin` unless it says otherwise, and runs under
the suite's own names unless told others: topics, groups and transactional ids prefixed
`wakeline-test`, the database `wakeline_test` (what `make test` exports and `make test-up`
creates), so a test run by hand never writes into what `make demo` shows. Set before any
test module imports `wakeline.contract.topics`, which reads the prefix once.

Services built in-process by the integration harnesses read private topics and groups
that no service principal's ACLs cover (kafka_acls.py); the ACL tests build their own
settings per principal, and the end-to-end stack starts each service with its own
principal (tests/e2e/stack.py drops WAKELINE_* from the services' environment).
"""

import os

os.environ.setdefault("WAKELINE_KAFKA_USERNAME", "admin")
os.environ.setdefault("WAKELINE_TOPIC_PREFIX", "wakeline-test")
os.environ.setdefault("WAKELINE_POSTGRES_DATABASE", "wakeline_test")
