"""deploy/k8s validates offline: Kubernetes' kinds against the schemas kubernetes-validate
ships, the operators' kinds against their documented APIs, and everything against the code
(topics, ACLs, settings, roles, Secrets); see k8s_checks.py. Each broken manifest below must
be rejected with the problem it has, so the checks are seen to bite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.unit import k8s_checks as k

OPERATIONS_DOC = (k.ROOT / "docs" / "operations.md").read_text()
BOOTSTRAP_SQL = (k.ROOT / "deploy" / "postgres" / "bootstrap.sql").read_text()
DOCS = k.load()


def problems(docs: list[k.Doc]) -> list[str]:
    return k.all_problems(docs, OPERATIONS_DOC, BOOTSTRAP_SQL)


def test_every_file_is_in_the_kustomization_and_every_listed_file_exists():
    assert k.kustomization_problems() == []


def test_the_manifests_hold_every_kind_the_deployment_needs():
    kinds = {(d.kind, d.name) for d in DOCS}
    services = [("Deployment", s) for s in ("gateway", "brain", "runner", "archiver", "signer")]
    for needed in [("Kafka", "wakeline"), ("KafkaNodePool", "dual"), ("Cluster", "wakeline-pg"),
                   ("Job", "wakeline-migrate"), ("CronJob", "wakeline-pack-months"), ("Service", "gateway"),
                   ("ScaledObject", "brain"),
                   ("ScaledObject", "runner"), *services]:
        assert needed in kinds


@pytest.mark.parametrize("doc", [d for d in DOCS if (d.body["apiVersion"], d.kind) in k.CORE_KINDS], ids=str)
def test_kubernetes_kinds_validate_against_the_shipped_schemas(doc: k.Doc):
    assert k.core_problems(doc) == []


@pytest.mark.parametrize("doc", [d for d in DOCS if (d.body["apiVersion"], d.kind) not in k.CORE_KINDS], ids=str)
def test_operator_kinds_validate_against_their_documented_api(doc: k.Doc):
    assert k.custom_resource_problems(doc) == []


def test_the_kafka_is_three_kraft_nodes_with_scram_and_acls():
    [pool] = k.of_kind(DOCS, "KafkaNodePool")
    assert pool.body["spec"]["replicas"] == 3 and set(pool.body["spec"]["roles"]) == {"controller", "broker"}
    [kafka] = k.of_kind(DOCS, "Kafka")
    spec = kafka.body["spec"]["kafka"]
    assert spec["authorization"]["type"] == "simple"
    assert [listener["authentication"]["type"] for listener in spec["listeners"]] == ["scram-sha-512"]
    assert spec["config"]["min.insync.replicas"] == 2 and spec["config"]["transaction.state.log.min.isr"] == 2


def test_every_topic_of_topics_py_has_its_kafka_topic_as_admin_topics_makes_it():
    assert k.topic_problems(DOCS) == []
    settings = k.the_settings(DOCS)
    assert settings is not None and (settings.replication_factor, settings.min_insync_replicas) == (3, 2)


def test_the_services_log_json_lines_and_serve_metrics_on_the_port_the_pods_expose():
    settings = k.the_settings(DOCS)
    assert settings is not None and settings.log_format == "json"
    assert (settings.metrics_host, settings.metrics_port) == ("0.0.0.0", 9100)


def test_every_container_runs_a_console_script_of_the_wheel():
    assert k.command_problems(DOCS) == []
    commands = {k.command_of(c) for _, pod in k.pod_templates(DOCS) for c in pod["containers"]}
    assert commands == set(k.SETTINGS_BY_COMMAND)  # every service, the migrate Job, pack-months, each once


def test_every_principal_of_grants_has_a_kafka_user_with_the_same_acls():
    assert k.acl_problems(DOCS) == []


def test_every_variable_a_container_gets_is_a_settings_field_and_parses():
    assert k.env_problems(DOCS) == []


def test_each_service_logs_in_as_itself_with_the_operators_generated_passwords():
    assert k.connection_problems(DOCS) == []
    assert k.role_problems(DOCS, BOOTSTRAP_SQL) == []


def test_every_secret_and_config_map_is_defined_or_generated_and_the_installers_are_documented():
    assert k.reference_problems(DOCS, OPERATIONS_DOC) == []
    generated = k.generated_secrets(DOCS)
    assert generated["wakeline-pg-app"] == "CloudNativePG"
    assert {n for n, by in generated.items() if by == "Strimzi user operator"} == {"brain", "runner", "archiver",
                                                                                  "gateway", "signer"}


def test_pods_are_restricted_but_the_runner_which_has_exactly_what_its_sandbox_needs():
    assert k.security_problems(DOCS) == []


def test_workloads_have_resources_probes_and_the_gateway_a_service():
    assert k.workload_problems(DOCS) == []


def test_brains_and_runners_scale_on_their_own_groups_lag_within_the_partition_count():
    assert k.scaling_problems(DOCS) == []


def _set(path: str | tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets `path` (dotted, or a tuple where a key holds dots; list indexes as
    numbers) to `value`."""
    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".") if isinstance(path, str) else path
        node: Any = body
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    return change


def _drop_env(container: str, name: str) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        [c] = [c for c in body["spec"]["template"]["spec"]["containers"] if c["name"] == container]
        c["env"] = [e for e in c["env"] if e["name"] != name]
    return change


def _add_env(container: str, name: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        [c] = [c for c in body["spec"]["template"]["spec"]["containers"] if c["name"] == container]
        c["env"].append({"name": name, "value": value})
    return change


POD = "spec.template.spec"
BROKEN = [
    # Kubernetes' schemas
    ("Deployment", "gateway", _set("spec.replicas", "two"), "'two' is not of type 'integer'"),
    ("Deployment", "brain", _set(f"{POD}.containers.0.livenessProbe.httpGet.paht", "/metrics"), "paht"),
    ("Service", "gateway", _set("spec.ports.0.port", "eighty"), "'eighty' is not of type 'integer'"),
    ("Job", "wakeline-migrate", _set(f"{POD}.restartPolicy", ["Never"]), "is not of type 'string'"),
    ("ScaledObject", "brain", _set("spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies.0.value",
                                   "one"), "ScaledObject behavior"),
    # the operators' documented APIs
    ("KafkaUser", "brain", _set("spec.authorization.acls.0.operations", ["Reed"]), "'Reed' is not one of"),
    ("KafkaUser", "runner", lambda b: b["spec"]["authorization"]["acls"][0].update(operation="Read"),
     "unknown field operation"),
    ("Kafka", "wakeline", _set("spec.kafka.listeners.0.authentication.type", "scram-sha-256"), "scram-sha-256"),
    ("Kafka", "wakeline", _set("spec.kafka.config.listeners", "PLAINTEXT://:9092"), "managed by Strimzi"),
    ("Kafka", "wakeline", _set("spec.kafka.replicas", 3), "unknown field replicas"),
    ("KafkaNodePool", "dual", _set("spec.roles", ["broker", "zookeeper"]), "'zookeeper' is not one of"),
    ("KafkaTopic", "wakeline.events", lambda b: b["metadata"]["labels"].clear(), "strimzi.io/cluster"),
    ("Cluster", "wakeline-pg", _set("spec.managed.roles.0.ensure", "exists"), "'exists' is not one of"),
    ("Cluster", "wakeline-pg", lambda b: b["spec"].pop("instances"), "required field instances"),
    ("ScaledObject", "runner", _set("spec.triggers.0.metadata.lagThreshold", 8), "expected a string"),
    ("ScaledObject", "runner", _set("spec.triggers.0.metadata.sasl", "scram-sha-512"), "is not one of"),
    ("TriggerAuthentication", "brain-kafka", _set("spec.secretTargetRef.0.parameter", "passwd"), "'passwd'"),
    # the code
    ("KafkaTopic", "wakeline.tool-calls", _set("spec.partitions", 12), "partitions 12"),
    ("KafkaTopic", "wakeline.inbox", _set(("spec", "config", "min.insync.replicas"), "1"), "topic_settings"),
    ("KafkaTopic", "wakeline.dead-letter", _set("spec.topicName", "wakeline.dead-letters"),
     "wakeline.dead-letter (wakeline.contract.topics) has no KafkaTopic"),
    ("KafkaUser", "archiver", lambda b: b["spec"]["authorization"]["acls"].pop(), "lacks Grant(principal='archiver'"),
    ("KafkaUser", "signer", lambda b: b["spec"]["authorization"]["acls"].pop(), "lacks Grant(principal='signer'"),
    ("KafkaTopic", "wakeline.checkpoints", _set("spec.partitions", 6), "partitions 6, wanted 1"),
    ("KafkaTopic", "wakeline.checkpoints", _set(("spec", "config", "cleanup.policy"), "compact"),
     "'cleanup.policy': 'compact'"),
    ("Deployment", "signer", _set(f"{POD}.containers.0.env.1.valueFrom.secretKeyRef.name", "gateway"),
     "WAKELINE_KAFKA_PASSWORD must be the Secret signer"),
    ("Deployment", "signer", _add_env("signer", "WAKELINE_SIGNER_EVERY", "60"), "WAKELINE_SIGNER_EVERY is no field"),
    ("KafkaUser", "gateway", _set("spec.authorization.acls.0.operations", ["Read", "Write"]),
     "which GRANTS does not"),
    ("KafkaUser", "gateway", _set("metadata.name", "gateway-x"), "principal gateway (kafka_acls.GRANTS) has no"),
    ("Deployment", "runner", _add_env("runner", "WAKELINE_SANDBOX_ROT", "/x"), "WAKELINE_SANDBOX_ROT is no field"),
    ("ConfigMap", "wakeline-config", _set("data.WAKELINE_PARTITIONS", "six"), "does not parse"),
    ("ConfigMap", "wakeline-config", _set("data.WAKELINE_KAFKA_BOOTSTRAP", "kafka:9092"), "Strimzi's is"),
    ("Deployment", "archiver", _set(f"{POD}.containers.0.env.1.valueFrom.secretKeyRef.name", "brain"),
     "WAKELINE_KAFKA_PASSWORD must be the Secret archiver"),
    ("Deployment", "gateway", _set(f"{POD}.containers.0.env.4.valueFrom.secretKeyRef.name", "pg-password"),
     "Secret pg-password is neither defined here"),
    ("Job", "wakeline-migrate", _set(f"{POD}.containers.0.envFrom.0.configMapRef.name", "wakeline-settings"),
     "ConfigMap wakeline-settings is not defined"),
    ("Cluster", "wakeline-pg", _set("spec.managed.roles.1.name", "wakeline_maint"), "bootstrap.sql makes"),
    ("Cluster", "wakeline-pg", _set("spec.managed.roles.0.superuser", True), "not superuser"),
    ("Deployment", "gateway", _set(f"{POD}.containers.0.securityContext.allowPrivilegeEscalation", True),
     "allowPrivilegeEscalation must be False"),
    ("Deployment", "brain", lambda b: b["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(
        capabilities={"drop": ["ALL"], "add": ["NET_RAW"]}), "adds capabilities"),
    ("Deployment", "archiver", _set(f"{POD}.containers.0.securityContext.seccompProfile.type", "Unconfined"),
     "seccomp Unconfined"),
    ("Deployment", "runner", lambda b: b["spec"]["template"]["spec"]["containers"][0]["securityContext"][
        "capabilities"]["add"].append("SYS_PTRACE"), "runner.yaml explains"),
    ("Deployment", "runner", _set(f"{POD}.containers.0.securityContext.allowPrivilegeEscalation", True),
     "allowPrivilegeEscalation must be False"),
    ("Deployment", "brain", lambda b: b["spec"]["template"]["spec"]["containers"][0].pop("readinessProbe"),
     "no readinessProbe"),
    ("Deployment", "gateway", _set(f"{POD}.containers.0.readinessProbe.httpGet.port", "web"), "port web is no port"),
    ("Service", "gateway", _set(("spec", "selector", "app.kubernetes.io/component"), "brian"), "selects 0 Deployments"),
    ("ScaledObject", "brain", _set("spec.maxReplicaCount", 12), "maxReplicaCount 12 > 6 partitions"),
    ("ScaledObject", "runner", _set("spec.triggers.0.metadata.consumerGroup", "wakeline-brain"),
     "runner consumes as wakeline-runner"),
    ("TriggerAuthentication", "runner-kafka", _set("spec.secretTargetRef.0.name", "brain"),
     "password must be the Secret runner"),
    ("Deployment", "archiver", _set(f"{POD}.containers.0.command", ["python", "-m", "wakeline_archiver"]),
     "is not a console script of the wheel"),
    ("Job", "wakeline-migrate", _set(f"{POD}.containers.0.command", ["wakeline", "migrat"]), "runs no known service"),
    ("Deployment", "brain", _drop_env("brain", "WAKELINE_POSTGRES_PASSWORDS__WAKELINE_SERVICE"),
     "WAKELINE_POSTGRES_PASSWORDS__WAKELINE_SERVICE must be the Secret wakeline-pg-service"),
]


@pytest.mark.parametrize("kind,name,change,expected", BROKEN, ids=[f"{b[0]}-{b[1]}-{b[3][:30]}" for b in BROKEN])
def test_a_broken_manifest_is_rejected_naming_its_problem(kind: str, name: str, change: Callable, expected: str):
    found = problems(k.mutated(DOCS, kind, name, change))
    assert any(expected in p for p in found), found


def test_the_unbroken_manifests_have_no_problem_at_all():
    assert problems(DOCS) == []
