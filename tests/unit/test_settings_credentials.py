"""Settings take passwords from the generated credentials file, the environment overriding it."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

from tests.private_broker import environ
from wakeline.transport.kafka_io import kafka_auth
from wakeline.ops.retention import RetentionSettings
from wakeline.runtime.dsn import with_password
from wakeline.runtime.settings import AdminSettings, CommonSettings, MissingCredentials
from wakeline_brain.settings import BrainSettings
from wakeline_runner.settings import RunnerSettings


@pytest.fixture
def credentials(tmp_path: Path):
    path = tmp_path / "credentials.env"
    path.write_text("WAKELINE_KAFKA_PASSWORDS__BRAIN=brain-secret\nWAKELINE_KAFKA_PASSWORDS__RUNNER=runner-secret\n"
                    "WAKELINE_POSTGRES_PASSWORDS__WAKELINE_SERVICE=svc/se cret\n"
                    "WAKELINE_POSTGRES_PASSWORDS__WAKELINE_OWNER=owner-secret\n")
    with environ(WAKELINE_CREDENTIALS_FILE=str(path)):
        yield path


def test_each_service_logs_in_to_kafka_as_its_own_principal(credentials: Path) -> None:
    brain = BrainSettings(kafka_username="brain")
    assert kafka_auth(brain) == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                                 "sasl_plain_username": "brain", "sasl_plain_password": "brain-secret"}
    assert RunnerSettings(kafka_username="runner").kafka_login() == ("runner", "runner-secret")


def test_the_service_classes_name_their_principals() -> None:
    fields = {cls.__name__: cls.model_fields["kafka_username"].default for cls in (BrainSettings, RunnerSettings)}
    assert fields == {"BrainSettings": "brain", "RunnerSettings": "runner"}


def test_the_environment_overrides_the_file(credentials: Path) -> None:
    with environ(WAKELINE_KAFKA_PASSWORD="from-env"):
        assert BrainSettings(kafka_username="brain").kafka_login() == ("brain", "from-env")


def test_a_principal_without_a_password_is_a_clear_error(credentials: Path) -> None:
    with pytest.raises(MissingCredentials, match="no Kafka password for principal 'gateway'.*make up"):
        kafka_auth(CommonSettings(kafka_username="gateway"))


def test_plaintext_needs_no_password(credentials: Path) -> None:
    settings = CommonSettings(kafka_username="nobody", kafka_security_protocol="PLAINTEXT")
    assert kafka_auth(settings) == {"security_protocol": "PLAINTEXT"}


def test_every_dsn_without_a_password_gets_its_roles(credentials: Path) -> None:
    at = "@db.example:5432/wakeline"  # given explicitly: the caller's environment may name other DSNs
    own = {"postgres_database": None}  # and another database (make test's)
    assert CommonSettings(postgres_dsn=f"postgresql://wakeline_service{at}", **own).postgres_dsn == \
        f"postgresql://wakeline_service:svc%2Fse%20cret{at}"
    assert AdminSettings(postgres_admin_dsn=f"postgresql://wakeline_owner{at}", **own).postgres_admin_dsn == \
        f"postgresql://wakeline_owner:owner-secret{at}"
    # No password for the maintenance role in this file: the DSN stays as it was.
    maintenance = f"postgresql://wakeline_maintenance{at}"
    assert RetentionSettings(postgres_maintenance_dsn=maintenance, **own).postgres_maintenance_dsn == maintenance


def test_postgres_database_names_the_database_of_every_dsn(credentials: Path) -> None:
    at = "@db.example:5432"
    common = CommonSettings(postgres_dsn=f"postgresql://wakeline_service{at}/wakeline", postgres_database="suite_db")
    assert common.postgres_dsn == f"postgresql://wakeline_service:svc%2Fse%20cret{at}/suite_db"
    assert common.database == "suite_db"
    admin = AdminSettings(postgres_admin_dsn=f"postgresql://wakeline_owner:given{at}/wakeline?sslmode=require",
                          postgres_database="suite_db")
    assert admin.postgres_admin_dsn == f"postgresql://wakeline_owner:given{at}/suite_db?sslmode=require"
    maintenance = RetentionSettings(postgres_maintenance_dsn=f"postgresql://wakeline_maintenance{at}/wakeline",
                                    postgres_database="suite_db")
    assert maintenance.postgres_maintenance_dsn == f"postgresql://wakeline_maintenance{at}/suite_db"
    assert CommonSettings(postgres_dsn=f"postgresql://u{at}/wakeline", postgres_database=None).database == "wakeline"


@pytest.mark.parametrize("name", ["", "wake-line", "a;b", "x" * 64])
def test_a_database_name_that_is_not_a_plain_identifier_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="postgres_database"):
        CommonSettings(postgres_database=name)


def test_a_dsn_that_names_a_password_keeps_it() -> None:
    dsn = "postgresql://wakeline_service:given@db:5432/wakeline"
    assert with_password(dsn, {"wakeline_service": SecretStr("other")}) == dsn


def test_sasl_ssl_brings_a_tls_context(credentials: Path) -> None:
    auth = kafka_auth(CommonSettings(kafka_username="brain", kafka_security_protocol="SASL_SSL"))
    assert auth["security_protocol"] == "SASL_SSL" and auth["ssl_context"] is not None


@pytest.fixture
def no_stack_variables(monkeypatch):
    """No WAKELINE_* of the shell (a helper's stack exports its own): only what the test sets."""
    for key in [k for k in os.environ if k.startswith("WAKELINE_") and k != "WAKELINE_CREDENTIALS_FILE"]:
        monkeypatch.delenv(key)
    return monkeypatch


def test_a_second_clone_sets_only_the_ports_and_every_address_follows(no_stack_variables) -> None:
    from wakeline_gateway.cli import CliSettings

    for key, value in (("WAKELINE_KAFKA_PORT", "29092"), ("WAKELINE_PG_PORT", "25432"), ("WAKELINE_HTTP_PORT", "28080"),
                       ("WAKELINE_POSTGRES_DATABASE", "wakeline_test")):
        no_stack_variables.setenv(key, value)
    admin, retention = AdminSettings(), RetentionSettings()
    assert admin.kafka_bootstrap == "127.0.0.1:29092"
    dsns = (admin.postgres_dsn, admin.postgres_admin_dsn, retention.postgres_maintenance_dsn)
    assert [(u.username, u.hostname, u.port, u.path) for u in map(urlsplit, dsns)] == [
        (role, "127.0.0.1", 25432, "/wakeline_test")
        for role in ("wakeline_service", "wakeline_owner", "wakeline_maintenance")]
    assert CliSettings().gateway_url == "http://127.0.0.1:28080"


def test_an_address_set_explicitly_wins_over_the_port(no_stack_variables) -> None:
    from wakeline_gateway.cli import CliSettings

    no_stack_variables.setenv("WAKELINE_KAFKA_PORT", "29092")
    no_stack_variables.setenv("WAKELINE_PG_PORT", "25432")
    no_stack_variables.setenv("WAKELINE_HTTP_PORT", "28080")
    no_stack_variables.setenv("WAKELINE_KAFKA_BOOTSTRAP", "kafka-1:9092,kafka-2:9092")
    no_stack_variables.setenv("WAKELINE_POSTGRES_DSN", "postgresql://wakeline_service@db:5432/wakeline")
    no_stack_variables.setenv("WAKELINE_GATEWAY_URL", "https://gw.example:443")
    admin = AdminSettings()
    assert admin.kafka_bootstrap == "kafka-1:9092,kafka-2:9092"
    assert urlsplit(admin.postgres_dsn).netloc.endswith("@db:5432")
    assert urlsplit(admin.postgres_admin_dsn).port == 25432  # the one left at its default follows
    assert CliSettings().gateway_url == "https://gw.example:443"


def test_without_ports_the_defaults_are_the_local_stacks(no_stack_variables) -> None:
    settings = CommonSettings()
    assert settings.kafka_bootstrap == "127.0.0.1:19092" and urlsplit(settings.postgres_dsn).port == 15432


def test_a_checkout_finds_its_credentials_file_from_any_directory(no_stack_variables, tmp_path: Path) -> None:
    """Run from elsewhere (a tool's own directory, /tmp), a checkout still reads its own
    `.data/credentials.env`: the root is the checkout the module sits in, not the working directory."""
    from wakeline.runtime.settings import credentials_file

    no_stack_variables.delenv("WAKELINE_CREDENTIALS_FILE", raising=False)
    no_stack_variables.chdir(tmp_path)
    assert credentials_file() == Path(__file__).resolve().parents[2] / ".data" / "credentials.env"
