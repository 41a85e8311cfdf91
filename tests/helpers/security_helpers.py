"""A secured cluster's broker settings (Kafka's keys) and the matching client settings of each
real client, shared by the security tests.

Every broker has four listeners: SSL (client certificates required), SASL_PLAINTEXT, SASL_SSL
(the inter-broker listener: brokers replicate and the controller talks over it, authenticating
with PLAIN as `admin`) and PLAINTEXT. SASL listeners enable PLAIN (users from the JAAS config)
and SCRAM-SHA-256/512 (credentials in ZooKeeper).
"""

from __future__ import annotations

from local_cluster.pki import Pki

ADMIN = ("admin", "admin-secret")
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
LISTENERS = "SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"


def plain_jaas(user: str, password: str, users: dict[str, str] | None = None) -> str:
    options = [f'username="{user}"', f'password="{password}"']
    options += [f'user_{name}="{secret}"' for name, secret in (users or {}).items()]
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {' '.join(options)};"


def scram_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def secured_broker(pki: Pki, **extra) -> dict[str, str]:
    """Broker overrides for `start_broker(i, **secured_broker(pki))`."""
    jaas = plain_jaas(*ADMIN, PLAIN_USERS)
    return {
        "listeners": LISTENERS,
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.endpoint.identification.algorithm": "https",
        **extra,
    }


def confluent(protocol: str, pki: Pki, mechanism: str | None = None, user=None, password=None, cert=None) -> dict:
    """librdkafka's keys for one way in."""
    conf = {"security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(pki.ca_file)
    if cert is not None:
        conf["ssl.certificate.location"], conf["ssl.key.location"] = (str(p) for p in pki.client_certificate(cert))
    if mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return conf
