"""`minikafka compose build|up|down|status`: the docker-compose cluster (docker-compose.yml) of
a 3-node ZooKeeper ensemble and brokers 1-3, its images built here without a registry (local_cluster/compose.py).
`up` builds (or reuses) the images, starts the containers and waits until all are healthy, then
prints the bootstrap servers for clients on the host; `down` removes containers, network and
volumes. `up --security ssl|sasl_plaintext|sasl_ssl` secures both listeners of every broker
(local_cluster/compose_security.py) and prints the admin's client settings, written to
`<dir>/client.properties`. Exit 1 with docker's output when a step fails, or when no Docker engine
answers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from local_cluster import compose, compose_security, secure


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("build", "up", "down", "status"))
    parser.add_argument(
        "--project", default=compose.PROJECT, help="the compose project name (default minikafka, as .env says)"
    )
    parser.add_argument(
        "--ports",
        default=",".join(map(str, compose.DEFAULT_PORTS)),
        help="host ports of brokers 1-3's EXTERNAL listeners (default 19092,19093,19094)",
    )
    parser.add_argument(
        "--security",
        choices=secure.PROTOCOLS,
        default="plaintext",
        help="up: secure both listeners (a new CA, passwords, the ACL authorizer; default plaintext)",
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(".minikafka/compose"), help="where --security writes its files"
    )


def _ports(text: str) -> tuple[int, int, int]:
    try:
        ports = tuple(int(p) for p in text.split(","))
    except ValueError:
        ports = ()
    if len(ports) != 3 or not all(0 < p < 65536 for p in ports):
        raise ValueError(f"--ports {text!r}: three port numbers, comma separated")
    return ports  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    try:
        cluster = compose.ComposeCluster(args.project, _ports(args.ports))
    except ValueError as e:
        print(f"minikafka compose: {e}", file=sys.stderr)
        return 2
    reason = compose.docker_unavailable()
    if reason:
        print(f"minikafka compose: {reason}", file=sys.stderr)
        return 1
    try:
        if args.action in ("build", "up"):
            compose.build_images()
        if args.action == "up":
            setup = None
            if args.security != "plaintext":
                setup, override = compose_security.prepare(args.dir.resolve(), args.security)
                cluster.overrides = (override,)
            seconds = cluster.up()
            print(f"cluster up and healthy in {seconds:.0f} s; bootstrap servers: {cluster.bootstrap}")
            if setup is not None:
                compose_security.add_admin_credential(cluster.bootstrap, args.dir.resolve(), setup)
                properties = args.dir.resolve() / "client.properties"
                print(f"security: {setup.protocol} on both listeners, ACLs on; admin settings in {properties}")
                print(f"  minikafka ... --command-config {properties}")
                print("  confluent-kafka / kcat: " + " ".join(f"-X {k}={v}" for k, v in setup.librdkafka.items()))
        elif args.action == "down":
            cluster.down()
            print(f"compose project {args.project}: removed (containers, network, volumes)")
        elif args.action == "status":
            for service in (*compose.ZOOKEEPERS, *compose.BROKERS):
                try:
                    health = cluster.health(service)
                    reason = cluster.health_reason(service) if health in ("unhealthy", "starting") else ""
                    print(f"{service}: {health}" + (f" ({reason})" if reason else ""))
                except compose.DockerError:
                    print(f"{service}: not created")
    except RuntimeError as e:  # DockerError, or the admin credential refused
        print(f"minikafka compose {args.action}: {e}", file=sys.stderr)
        return 1
    return 0
