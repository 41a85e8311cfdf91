"""A secured local cluster (`minikafka cluster up --security ssl|sasl_plaintext|sasl_ssl`): every
broker gets one listener of that protocol, which is also the inter-broker listener, and the ACL
authorizer with two super users, the brokers and `admin`.

- TLS (ssl, sasl_ssl): a new CA and a broker certificate (`local_cluster.pki`) under
  `<dir>/pki/`; with `ssl` alone, clients identify with certificates (`ssl.client.auth=required`,
  the admin's is `pki/client-admin.pem`).
- SASL (sasl_plaintext, sasl_ssl): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are enabled; brokers log
  in to each other with PLAIN as `broker`; `admin` has SCRAM-SHA-512 credentials written to
  ZooKeeper (`/config/users/admin`) before the brokers start. Passwords are random.
- `<dir>/client.properties` holds the admin's settings with Kafka's client keys (for `minikafka
  ... --command-config` and Java tools); `client_settings()` gives librdkafka's for confluent-kafka
  and kcat.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from local_cluster.pki import BROKER_HOSTS, make_pki
from security.scram import make_credential

PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
BROKER_USER = "broker"
ADMIN = "admin"
ADMIN_CERT_PRINCIPAL = "User:CN=admin,OU=clients,O=minikafka"
BROKER_CERT_PRINCIPAL = "User:CN=broker,OU=brokers,O=minikafka"
ZOOKEEPER_USER = "kafka"  # the brokers' (and tools') identity in ZooKeeper, as in Kafka's docs


@dataclass
class SecureSetup:
    protocol: str  # Kafka's name, e.g. SASL_SSL
    broker_overrides: dict[str, str] = field(default_factory=dict)
    client_properties: dict[str, str] = field(default_factory=dict)  # Kafka's (Java) client keys
    librdkafka: dict[str, str] = field(default_factory=dict)  # confluent-kafka / kcat keys
    admin_password: str | None = None
    broker_password: str | None = None  # the brokers' PLAIN password (SASL)
    zookeeper_password: str = ""  # ZooKeeper's SASL DIGEST-MD5 password of ZOOKEEPER_USER
    zookeeper_jaas: Path | None = None  # the JAAS file with the brokers' and tools' Client login

    @property
    def zookeeper_users(self) -> dict[str, str]:
        """ZooKeeper's SASL users ({user: password}), for ZooKeeperProcess.start."""
        return {ZOOKEEPER_USER: self.zookeeper_password}

    @property
    def zookeeper_login(self) -> tuple[str, str]:
        return ZOOKEEPER_USER, self.zookeeper_password


def prepare(directory: Path, protocol: str, hosts: tuple[str, ...] = BROKER_HOSTS) -> SecureSetup:
    """Certificates (the broker's valid for `hosts`) and passwords for a new cluster in
    `directory` (nothing is started)."""
    name = protocol.upper()
    setup = SecureSetup(name)
    o = setup.broker_overrides
    o.update(
        {
            "listener.security.protocol.map": f"{name}:{name}",
            "inter.broker.listener.name": name,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        }
    )
    supers = []
    if "SSL" in name:
        pki = make_pki(directory / "pki", hosts)
        o.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(pki.broker_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(pki.ca_file),
            }
        )
        setup.client_properties.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)})
        setup.librdkafka["ssl.ca.location"] = str(pki.ca_file)
        if name == "SSL":
            o["ssl.client.auth"] = "required"
            cert, key = pki.client_certificate(ADMIN)
            keystore = pki.client_keystore(ADMIN)
            setup.client_properties.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)})
            setup.librdkafka.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
            supers += [BROKER_CERT_PRINCIPAL, ADMIN_CERT_PRINCIPAL]
    if "SASL" in name:
        broker_password, setup.admin_password = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
        setup.broker_password = broker_password
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{BROKER_USER}" password="{broker_password}" user_{BROKER_USER}="{broker_password}";'
        )
        o.update(
            {
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                f"listener.name.{name.lower()}.plain.sasl.jaas.config": jaas,
            }
        )
        setup.client_properties.update(
            {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{ADMIN}" password="{setup.admin_password}";',
            }
        )
        setup.librdkafka.update(
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": setup.admin_password}
        )
        supers += [f"User:{BROKER_USER}", f"User:{ADMIN}"]
    o["super.users"] = ";".join(supers)
    # ZooKeeper: SASL DIGEST-MD5 required of every client; the brokers create Kafka's ACLs
    setup.zookeeper_password = secrets.token_urlsafe(18)
    setup.zookeeper_jaas = directory / "zookeeper-client.jaas"
    setup.zookeeper_jaas.write_text(
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{ZOOKEEPER_USER}" password="{setup.zookeeper_password}";\n}};\n'
    )
    setup.zookeeper_jaas.chmod(0o600)
    o.update({"zookeeper.set.acl": "true", "java.security.auth.login.config": str(setup.zookeeper_jaas)})
    setup.client_properties = {"security.protocol": name, **setup.client_properties}
    setup.librdkafka = {"security.protocol": name, **setup.librdkafka}
    return setup


def write_admin_credentials(zk_connect: str, setup: SecureSetup) -> None:
    """`admin`'s SCRAM-SHA-512 credential in ZooKeeper, as Kafka's `kafka-configs.sh --zookeeper`
    writes it before the brokers start (no change notification is needed then)."""
    if setup.admin_password is None:
        return
    from kazoo.client import KazooClient

    from zk.client import kafka_acls, sasl_options

    credential = make_credential("SCRAM-SHA-512", setup.admin_password, 8192)
    config = {"version": 1, "config": {"SCRAM-SHA-512": credential.to_text()}}
    login = setup.zookeeper_login if setup.zookeeper_password else None
    zk = KazooClient(hosts=zk_connect, sasl_options=sasl_options(login))
    zk.start(30)
    try:
        for parent in ("/config", "/config/users"):
            zk.ensure_path(parent, acl=kafka_acls(parent, login))
        path = f"/config/users/{ADMIN}"
        data = json.dumps(config, separators=(",", ":")).encode()
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, acl=kafka_acls(path, login))
    finally:
        zk.stop()
        zk.close()


def properties_text(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())
