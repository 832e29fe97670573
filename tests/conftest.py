"""Every test process is Kafka's super user `admin` unless it says otherwise.

Services built in-process by the integration harnesses read private topics and groups
that no service principal's ACLs cover (kafka_acls.py); the ACL tests build their own
settings per principal, and the end-to-end stack starts each service with its own
principal (tests/e2e/stack.py drops WAKELINE_* from the services' environment).
"""

import os

os.environ.setdefault("WAKELINE_KAFKA_USERNAME", "admin")
