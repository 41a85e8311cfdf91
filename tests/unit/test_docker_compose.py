"""docker-compose.yml and the Dockerfiles, read without a Docker engine (tests/cluster/test_compose_cluster.py
runs them): every broker service's KAFKA_* environment is a configuration the broker accepts, with
Kafka's INTERNAL/EXTERNAL listener pattern, and the images build from a base given as an argument
with nothing fetched from the network."""

import pathlib
import re
from pathlib import Path

import yaml

from broker.config import load_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT = re.compile(r"\$\{(\w+):-([^}]*)\}")


def substitute(text: str) -> str:
    """Compose's `${VAR:-default}` with every variable unset."""
    return DEFAULT.sub(lambda m: m.group(2), text)


def test_broker_services_use_internal_and_external_listeners_the_broker_accepts():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    brokers = {name: s for name, s in services.items() if name.startswith("broker")}
    assert len(brokers) == 3 and {"zookeeper1", "zookeeper2", "zookeeper3"} <= set(services)
    ids, external_ports = set(), set()
    for name, service in brokers.items():
        env = {k: substitute(str(v)) for k, v in service["environment"].items()}
        config = load_config(None, [], environ=env)  # raises on anything the broker rejects
        assert config["zookeeper.connect"] == "zookeeper1:2181,zookeeper2:2181,zookeeper3:2181"
        assert config["inter.broker.listener.name"] == "INTERNAL"
        listeners = {listener.name: listener for listener in config.listeners}
        advertised = {listener.name: listener for listener in config.advertised_listeners}
        assert set(listeners) == set(advertised) == {"INTERNAL", "EXTERNAL"}
        assert (advertised["INTERNAL"].host, advertised["INTERNAL"].port) == (name, listeners["INTERNAL"].port)
        published = [substitute(p) for p in service["ports"]]
        metrics = config["metrics.port"]  # the Prometheus endpoint, published beside the listener
        assert published == [
            f"{advertised['EXTERNAL'].port}:{listeners['EXTERNAL'].port}",
            f"{19403 + config.broker_id}:{metrics}",
        ]
        assert advertised["EXTERNAL"].host == "127.0.0.1"
        assert config["min.insync.replicas"] <= config["default.replication.factor"] <= len(brokers)
        assert all(service["depends_on"][f"zookeeper{i}"]["condition"] == "service_healthy" for i in (1, 2, 3))
        health = service["healthcheck"]["test"]
        assert "minikafka_cli.health" in health and health[-2:] == ["--broker-id", str(config.broker_id)]
        volume = service["volumes"][0].split(":")
        assert volume[1] == str(config.log_dirs[0]) and volume[0] in compose["volumes"]
        ids.add(config.broker_id)
        external_ports.add(advertised["EXTERNAL"].port)
    assert ids == {1, 2, 3} and len(external_ports) == 3


def _instructions(path: pathlib.Path) -> list[str]:
    text = path.read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_broker_image_installs_wheels_offline_on_a_base_given_as_an_argument():
    lines = _instructions(ROOT / "Dockerfile")
    assert lines[0] == "ARG BASE_IMAGE=python:3.11-slim-bookworm" and lines[1] == "FROM ${BASE_IMAGE}"
    run = next(line for line in lines if line.startswith("RUN"))
    assert "--no-index" in run and "minikafka-native" in run
    assert lines[-1] == 'ENTRYPOINT ["minikafka", "broker", "--env-config"]'
    assert (ROOT / ".dockerignore").read_text().split("\n")[-2:] == ["!docker/wheels/", ""]


def test_the_zookeeper_image_runs_debians_zookeeper_with_its_config():
    lines = _instructions(ROOT / "docker" / "zookeeper" / "Dockerfile")
    assert lines[1] == "FROM ${BASE_IMAGE}"
    config = dict(
        line.split("=", 1) for line in (ROOT / "docker" / "zookeeper" / "zoo.cfg").read_text().splitlines() if line
    )
    assert config["clientPort"] == "2181" and "ruok" in config["4lw.commands.whitelist"]
    assert lines[-1] == 'ENTRYPOINT ["/usr/local/bin/minikafka-zookeeper"]'
    assert "QuorumPeerMain" in (ROOT / "docker" / "zookeeper" / "entrypoint.sh").read_text()


def test_three_zookeeper_nodes_form_one_ensemble_and_the_project_name_is_set_in_the_repository():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    servers = {services[f"zookeeper{i}"]["environment"]["ZOO_SERVERS"] for i in (1, 2, 3)}
    assert servers == {" ".join(f"server.{i}=zookeeper{i}:2888:3888;2181" for i in (1, 2, 3))}
    assert [services[f"zookeeper{i}"]["environment"]["ZOO_MY_ID"] for i in (1, 2, 3)] == ["1", "2", "3"]
    assert all("leader|follower" in " ".join(services[f"zookeeper{i}"]["healthcheck"]["test"]) for i in (1, 2, 3))
    assert "COMPOSE_PROJECT_NAME=minikafka" in (ROOT / ".env").read_text().splitlines()


def test_the_broker_image_has_no_java():
    base = (ROOT / "docker" / "build-base.sh").read_text()
    broker_packages = re.search(r'BROKER_PACKAGES="\$\{MINIKAFKA_BROKER_PACKAGES:-([^}]*)\}"', base).group(1).split(",")
    assert "python3" in broker_packages and not any("jre" in p or "zookeeper" in p for p in broker_packages)


def test_the_security_override_is_a_configuration_the_broker_accepts(tmp_path):
    import json

    from local_cluster import compose_security

    setup, override = compose_security.prepare(tmp_path, "sasl_ssl")
    services = json.loads(override.read_text())["services"]
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for i in (1, 2, 3):  # SASL required of every ZooKeeper client (issue 34), on each ensemble node
        zookeeper = services.pop(f"zookeeper{i}")
        mounted, inside = zookeeper["volumes"][0].split(":")[:2]
        assert zookeeper["environment"] == {"ZOO_CONF_DIR": inside}
        assert "enforce.auth.enabled=true" in (Path(mounted) / "zoo.cfg").read_text()
        assert f'user_kafka="{setup.zookeeper_password}"' in (Path(mounted) / "jaas.conf").read_text()
    for name, service in services.items():
        env = {k: substitute(str(v)) for k, v in base[name]["environment"].items()} | service["environment"]
        assert env["KAFKA_ZOOKEEPER_SET_ACL"] == "true"
        # the container's paths, read here from the host directory they are mounted from
        on_host = {k: v.replace(compose_security.CONTAINER_DIR, str(tmp_path / "pki")) for k, v in env.items()}
        config = load_config(None, [], environ=on_host)
        assert config.zookeeper_login() == ("kafka", setup.zookeeper_password)
        assert {listener.name for listener in config.listeners} == {"INTERNAL", "EXTERNAL"}
        assert config["listener.security.protocol.map"] == "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL"
        assert config["inter.broker.listener.name"] == "INTERNAL"
        for listener in ("internal", "external"):
            assert setup.broker_password in env[f"KAFKA_LISTENER_NAME_{listener.upper()}_PLAIN_SASL_JAAS_CONFIG"]
        assert env["KAFKA_SSL_KEYSTORE_LOCATION"] == f"{compose_security.CONTAINER_DIR}/broker.pem"
        assert service["volumes"] == [f"{tmp_path / 'pki'}:{compose_security.CONTAINER_DIR}:ro"]
        assert "--command-config" in service["healthcheck"]["test"]
    assert (tmp_path / "pki" / "health.properties").read_text().startswith("security.protocol=SASL_SSL\n")


def test_building_the_wheels_removes_only_setuptools_leftovers_from_build(tmp_path):
    # the other pytest tier writes the console's screenshots under build/ while the compose tests
    # build images; a wheel build that removed all of build/ deleted a screenshot Chromium had
    # just written (a CI failure)
    from local_cluster.compose import remove_setuptools_build

    build = tmp_path / "build"
    for stale in ("lib/broker", "bdist.linux-x86_64/wheel", "temp.linux-x86_64-cpython-311"):
        (build / stale).mkdir(parents=True)
    shot = build / "screenshots" / "console" / "1-cluster.png"
    shot.parent.mkdir(parents=True)
    shot.write_bytes(b"\x89PNG")
    removed = remove_setuptools_build(tmp_path)
    assert sorted(p.name for p in removed) == ["bdist.linux-x86_64", "lib", "temp.linux-x86_64-cpython-311"]
    assert sorted(p.name for p in build.iterdir()) == ["screenshots"] and shot.read_bytes() == b"\x89PNG"
    assert remove_setuptools_build(tmp_path / "nowhere") == []
