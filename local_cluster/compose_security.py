"""The docker-compose cluster secured (`minikafka compose up --security ssl|sasl_plaintext|sasl_ssl`):
both listeners of every broker, INTERNAL and EXTERNAL, use the protocol, with the same CA,
passwords, authorizer and super users as `minikafka cluster up --security` (local_cluster/secure.py).

Written under `directory`:
- `pki/`: the CA and the broker certificate (valid for broker1-3, 127.0.0.1 and localhost),
  mounted read-only in the broker containers at /etc/minikafka/security, with
  `health.properties` (the brokers' own client settings, for the healthcheck);
- `docker-compose.security.yml`: the override compose reads after docker-compose.yml (Kafka's keys
  as KAFKA_* variables, the mount, the healthcheck with `--command-config`); JSON, which YAML reads;
- `zookeeper/`: the ZooKeeper service's zoo.cfg and JAAS file requiring SASL of every client
  (the brokers log in as `kafka` with `pki/zookeeper-client.jaas` and set Kafka's znode ACLs);
- `client.properties`: the admin's settings with Kafka's client keys and host paths, for
  `minikafka ... --command-config` (the admin's SCRAM-SHA-512 credential is added through
  AlterUserScramCredentials once the brokers are healthy: `add_admin_credential`).
"""

from __future__ import annotations

import json
from pathlib import Path

from local_cluster import secure
from local_cluster.compose import BROKERS, ROOT, ZOOKEEPERS
from local_cluster.pki import BROKER_HOSTS
from local_cluster.zookeeper import SASL_REQUIRED, server_jaas

CONTAINER_DIR = "/etc/minikafka/security"
LISTENERS = ("INTERNAL", "EXTERNAL")


def _variable(key: str) -> str:
    """Kafka's key as the broker reads it from the environment (`--env-config`)."""
    return "KAFKA_" + key.upper().replace(".", "_")


def container_environment(setup: secure.SecureSetup, pki_dir: Path) -> dict[str, str]:
    """The broker overrides of `setup` (one listener named after the protocol) as KAFKA_* variables
    for both compose listeners, with host paths turned into container paths."""
    protocol = setup.protocol
    per_listener = f"listener.name.{protocol.lower()}."
    env = {}
    for key, value in setup.broker_overrides.items():
        value = value.replace(str(pki_dir), CONTAINER_DIR)
        if key == "listener.security.protocol.map":
            value = ",".join(f"{listener}:{protocol}" for listener in LISTENERS)
        elif key == "inter.broker.listener.name":
            value = "INTERNAL"
        elif key.startswith(per_listener):
            for listener in LISTENERS:
                env[_variable(f"listener.name.{listener.lower()}.{key[len(per_listener) :]}")] = value
            continue
        env[_variable(key)] = value
    return env


def _broker_client(setup: secure.SecureSetup, truststore: str, keystore: str) -> dict[str, str]:
    """The brokers' own client settings (Kafka's keys): the healthcheck's and the admin bootstrap's."""
    props = {"security.protocol": setup.protocol}
    if "SSL" in setup.protocol:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": truststore}
        if setup.protocol == "SSL":  # client certificates required: the broker's own identifies it
            props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore}
    if "SASL" in setup.protocol:
        props |= {
            "sasl.mechanism": "PLAIN",
            "sasl.username": secure.BROKER_USER,
            "sasl.password": setup.broker_password,
        }
    return props


ZOOKEEPER_DIR = "/etc/minikafka-zookeeper-secure"


def _secured_zookeeper(directory: Path, setup: secure.SecureSetup) -> dict:
    """The zookeeper services' override: the image's configuration plus SASL required of every
    client (DIGEST-MD5, the brokers' login only; enforce.auth.enabled), mounted read-only where
    the image's entrypoint reads it (ZOO_CONF_DIR); the ensemble settings stay the base file's."""
    conf = directory / "zookeeper"
    conf.mkdir(exist_ok=True)
    image_conf = ROOT / "docker" / "zookeeper"  # the image's own configuration, plus SASL
    (conf / "zoo.cfg").write_text((image_conf / "zoo.cfg").read_text() + SASL_REQUIRED)
    (conf / "log4j.properties").write_text((image_conf / "log4j.properties").read_text())
    (conf / "jaas.conf").write_text(server_jaas(setup.zookeeper_users))
    return {"volumes": [f"{conf}:{ZOOKEEPER_DIR}:ro"], "environment": {"ZOO_CONF_DIR": ZOOKEEPER_DIR}}


def prepare(directory: Path, protocol: str) -> tuple[secure.SecureSetup, Path]:
    """Certificates, passwords and the override file; (the setup, the override's path)."""
    directory.mkdir(parents=True, exist_ok=True)
    setup = secure.prepare(directory, protocol, hosts=(*BROKER_HOSTS, *BROKERS))
    pki = directory / "pki"
    pki.mkdir(exist_ok=True)
    health = _broker_client(setup, f"{CONTAINER_DIR}/ca.pem", f"{CONTAINER_DIR}/broker.pem")
    (pki / "health.properties").write_text(secure.properties_text(health))
    (directory / "broker-client.properties").write_text(
        secure.properties_text(_broker_client(setup, str(pki / "ca.pem"), str(pki / "broker.pem")))
    )
    (directory / "client.properties").write_text(secure.properties_text(setup.client_properties))
    for name in ("client.properties", "broker-client.properties"):
        (directory / name).chmod(0o600)
    jaas = pki / "zookeeper-client.jaas"  # the brokers' ZooKeeper login, mounted with the rest
    jaas.write_text(setup.zookeeper_jaas.read_text() if setup.zookeeper_jaas else "")
    jaas.chmod(0o644)  # read by the container's user; the directory holds the keys already
    setup.broker_overrides["java.security.auth.login.config"] = str(jaas)
    env = container_environment(setup, pki)
    services: dict[str, dict] = {zk: _secured_zookeeper(directory, setup) for zk in ZOOKEEPERS}
    for i, service in enumerate(BROKERS, 1):
        services[service] = {
            "environment": env,
            "volumes": [f"{pki}:{CONTAINER_DIR}:ro"],
            "healthcheck": {
                "test": [
                    "CMD",
                    "python",
                    "-m",
                    "minikafka_cli.health",
                    "--bootstrap-server",
                    f"{service}:9092",
                    "--command-config",
                    f"{CONTAINER_DIR}/health.properties",
                    "--broker-id",
                    str(i),
                ]
            },
        }
    override = directory / "docker-compose.security.yml"
    override.write_text(json.dumps({"services": services}, indent=2) + "\n")
    return setup, override


def add_admin_credential(bootstrap: str, directory: Path, setup: secure.SecureSetup) -> None:
    """The admin's SCRAM-SHA-512 credential, written through AlterUserScramCredentials by the
    brokers' PLAIN user (a super user). Raises RuntimeError when the brokers refuse it."""
    if setup.admin_password is None:
        return
    import trio

    from broker.config import parse_properties
    from client import Cluster
    from client.admin import upsert_scram_credential
    from security.config import client_security

    brokers = client_security(parse_properties((directory / "broker-client.properties").read_text()))

    async def add() -> tuple[int, str | None]:
        async with Cluster.open(bootstrap, security=brokers) as cluster:
            return await upsert_scram_credential(cluster, secure.ADMIN, "SCRAM-SHA-512", setup.admin_password, 8192)

    code, message = trio.run(add)
    if code != 0:
        raise RuntimeError(f"the brokers refused the admin's SCRAM credential: error {code}: {message}")
