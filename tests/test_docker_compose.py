"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs on our machines):
every broker service runs a real `minikafka broker` whose environment configuration the broker
accepts, and ids, ports, listeners and zookeeper.connect agree across services."""

import pathlib
import shlex

import yaml

from broker.config import Listener, load_config

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_compose_services_are_real_broker_invocations_that_agree():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    brokers = {name: s for name, s in services.items() if name.startswith("broker")}
    assert len(brokers) == 3 and "zookeeper" in services
    zk_port = int(services["zookeeper"]["ports"][0].split(":")[1])
    ids, ports = set(), set()
    for name, service in brokers.items():
        command = service["command"]
        assert command[:2] == ["minikafka", "broker"] and "--env-config" in command
        env = {k: str(v) for k, v in service["environment"].items()}
        config = load_config(None, [], environ=env)  # the broker accepts it (raises otherwise)
        assert config["zookeeper.connect"] == f"zookeeper:{zk_port}"
        listener = config.listeners[0]
        advertised = config.advertised_listeners[0]
        assert advertised == Listener("PLAINTEXT", name, listener.port)  # reachable by service name
        assert service["ports"] == [f"{listener.port}:{listener.port}"]
        assert config["min.insync.replicas"] <= config["default.replication.factor"] <= len(brokers)
        assert service["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        volume = service["volumes"][0].split(":")
        assert volume[1] == str(config.log_dirs[0]) and volume[0] in compose["volumes"]
        ids.add(config.broker_id)
        ports.add(listener.port)
    assert ids == {1, 2, 3} and len(ports) == 3


def test_dockerfile_runs_the_broker_from_the_environment():
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    entrypoint = next(line for line in lines if line.startswith("ENTRYPOINT"))
    assert entrypoint == 'ENTRYPOINT ["minikafka", "broker", "--env-config"]'
    copied = {shlex.split(line)[1] for line in lines if line.startswith("COPY")}
    for package in ("protocol", "storage", "broker", "controller", "client", "minikafka_cli"):
        assert package in copied and (ROOT / package).is_dir()
