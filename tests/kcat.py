"""kcat's login to the broker: SASL PLAIN as a principal from the credentials file.

The broker's SCRAM is refused to librdkafka before 2.6.1 (Debian's kcat links 2.0.2;
confluentinc/librdkafka#4895), so kcat logs in with PLAIN, which the local listener also
takes (deploy/kafka/server.properties.template), as the same principal and password.
"""

from __future__ import annotations

from wakeline.runtime.settings import CommonSettings


def kcat_login(principal: str = "admin") -> list[str]:
    """kcat arguments (-X ...) that log in as `principal`."""
    settings = CommonSettings(kafka_username=principal)
    if settings.kafka_security_protocol == "PLAINTEXT":
        return []
    username, password = settings.kafka_login()
    return ["-X", f"security.protocol={settings.kafka_security_protocol}", "-X", "sasl.mechanisms=PLAIN",
            "-X", f"sasl.username={username}", "-X", f"sasl.password={password}"]
