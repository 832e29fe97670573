"""docker-compose.yml describes a real deployment of every service in services/."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.packaging import PYPROJECT

ROOT = Path(__file__).resolve().parents[2]


def _placeholder_passwords() -> dict[str, str]:
    """What `docker compose config` needs to interpolate (it refuses a missing password)."""
    names = ["KAFKA_PASSWORDS__" + p for p in ("ADMIN", "BRAIN", "RUNNER", "ARCHIVER", "GATEWAY")]
    names += ["POSTGRES_PASSWORDS__" + r for r in ("POSTGRES", "WAKELINE_OWNER", "WAKELINE_SERVICE",
                                                   "WAKELINE_MAINTENANCE")]
    return {f"WAKELINE_{n}": "placeholder" for n in names}


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_names_every_service_in_services_dir():
    services = {p.name for p in (ROOT / "services").iterdir() if (p / "__main__.py").exists()}
    assert services == {"brain", "runner", "archiver", "gateway"}
    defined = compose()["services"]
    scripts = PYPROJECT["project"]["scripts"]
    for name in services:
        assert name in defined, f"docker-compose.yml lacks service {name}"
        # the wheel's console script for it (the image installs only the wheel)
        assert defined[name]["command"] == [f"wakeline-{name}"]
        assert scripts[f"wakeline-{name}"] == f"wakeline_{name}.__main__:main"


def test_compose_runs_a_three_node_kraft_cluster_from_the_official_image_and_scales_runners():
    services = compose()["services"]
    nodes = [services[f"kafka-{n}"] for n in (1, 2, 3)]
    assert all(node["image"].startswith("apache/kafka:") for node in nodes)
    assert {node["environment"]["KAFKA_NODE_ID"] for node in nodes} == {1, 2, 3}
    for node in nodes:
        env = node["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 3
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == 2
        assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["runner"]["deploy"]["replicas"] >= 2


def test_every_wakeline_container_creates_and_checks_topics_with_replication_3_and_min_isr_2():
    services = compose()["services"]
    for name in ("migrate", "brain", "runner", "archiver", "gateway", "signer"):
        env = services[name]["environment"]
        assert env["WAKELINE_REPLICATION_FACTOR"] == "3", name
        assert env["WAKELINE_MIN_INSYNC_REPLICAS"] == "2", name
        assert env["WAKELINE_KAFKA_BOOTSTRAP"].count("kafka-") == 3, name


def test_compose_takes_every_password_from_the_environment_and_each_service_its_own_principal():
    text = (ROOT / "docker-compose.yml").read_text()
    for role in ("wakeline_owner", "wakeline_service", "wakeline_maintenance"):
        assert f"{role}:{role}" not in text
    services = compose()["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${WAKELINE_POSTGRES_PASSWORDS__")
    for name in ("brain", "runner", "archiver", "gateway", "signer"):
        env = services[name]["environment"]
        assert env["WAKELINE_KAFKA_USERNAME"] == name
        assert env["WAKELINE_KAFKA_PASSWORD"] == f"${{WAKELINE_KAFKA_PASSWORDS__{name.upper()}:?set it}}"
        user = env["WAKELINE_POSTGRES_DSN"].split("//")[1].split("@")[0]
        assert user == "wakeline_service"  # no password in the DSN: the settings add it
    for n in (1, 2, 3):
        env = services[f"kafka-{n}"]["environment"]
        assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "BROKER:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
        assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"


def test_docker_compose_config_accepts_the_file_where_the_plugin_exists():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("no docker compose plugin on this machine (the structural checks above still ran)")
    result = subprocess.run([docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                            capture_output=True, text=True,
                            env={**os.environ, "ANTHROPIC_API_KEY": "", **_placeholder_passwords()})
    assert result.returncode == 0, result.stderr
