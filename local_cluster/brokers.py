"""Broker processes for a local cluster (and the tests): start, stop (SIGTERM), kill (SIGKILL).

`BrokerProcess.start(...)` runs `python -m minikafka_cli.main broker` with a generated
`server.properties` and waits for its readiness line, which carries the bound port (listeners may
use port 0). Logs go to `<directory>/broker.log` (rotated by the broker) and standard error to
`<directory>/broker.stderr.log`.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

LOG = "broker.log"  # the broker's own log, rotated by size by the broker
STDERR_LOG = "broker.stderr.log"  # what it writes to standard error (start-up failures, crashes)
READY = re.compile(r"minikafka broker (\d+) started, listening on [A-Z_]+://([^:]+):(\d+)(.*)")
ENDPOINT = re.compile(r"([A-Z_][A-Z0-9_]*)://([^:,\s]+):(\d+)")
METRICS = re.compile(r"metrics http://([^:\s]+):(\d+)/metrics")


class BrokerStartError(RuntimeError):
    pass


def start_all(brokers: list[BrokerProcess], timeout_s: float = 30.0) -> None:
    """Start `brokers` at once and wait until every one is ready (a broker's start is mostly
    its own imports and ZooKeeper registration, so three take about as long as one). Raises the
    first BrokerStartError, after killing every broker of the list."""
    deadline = time.monotonic() + timeout_s
    try:
        for broker in brokers:
            broker._launch(*broker._prepare())
        for broker in brokers:
            broker._wait_ready(deadline, timeout_s)
    except BaseException:
        for broker in brokers:
            broker.kill()
        raise


def quickstart_settings(brokers: int) -> dict[str, str]:
    """Kafka's quickstart choices for a local cluster of `brokers`: groups, share groups and
    transactions work on fewer than 3 brokers (their internal topics replicated as far as the cluster allows) and a
    group's first rebalance does not wait."""
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "share.coordinator.state.topic.replication.factor": str(min(3, brokers)),
        "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
        "group.initial.rebalance.delay.ms": "0",
    }


def die_with_parent() -> None:
    """A Popen `preexec_fn`: the child gets SIGKILL when the process that started it dies, even by
    SIGKILL (Linux's PR_SET_PDEATHSIG), so a killed test run leaves no broker or ZooKeeper behind."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class BrokerProcess:
    broker_id: int
    directory: Path
    properties: dict[str, str]
    process: subprocess.Popen | None = None
    host: str = "127.0.0.1"
    port: int = 0
    stdout_lines: list[str] = field(default_factory=list)
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)  # listener -> (host, port)
    metrics_port: int | None = None  # the Prometheus endpoint's port, when metrics.port is set
    die_with_parent: bool = False  # SIGKILL when the starting process dies (minikafka.testing)

    @property
    def metrics_url(self) -> str | None:
        return f"http://{self.host}:{self.metrics_port}/metrics" if self.metrics_port is not None else None

    def endpoint(self, listener: str) -> str:
        """`host:port` of a named listener (as the broker advertised it)."""
        host, port = self.endpoints[listener]
        return f"{host}:{port}"

    def _ready(self, line: str) -> None:
        """Record the advertised endpoints of the readiness line; listeners bound to port 0 keep
        the ports they got, so a restart binds the same ones."""
        m = READY.search(line)
        assert m is not None
        self.host, self.port = m.group(2), int(m.group(3))
        self.endpoints = {name: (host, int(port)) for name, host, port in ENDPOINT.findall(line)}
        listeners = []
        for item in self.properties["listeners"].split(","):
            name, _, address = item.strip().partition("://")
            host, _, port = address.rpartition(":")
            if port == "0" and name.upper() in self.endpoints:
                port = str(self.endpoints[name.upper()][1])
            listeners.append(f"{name}://{host}:{port}")
        self.properties["listeners"] = ",".join(listeners)
        metrics = METRICS.search(line)
        if metrics is not None:
            self.metrics_port = int(metrics.group(2))
            if self.properties.get("metrics.port") == "0":
                self.properties["metrics.port"] = metrics.group(2)  # a restart binds the same port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def create(
        cls, broker_id: int, directory: Path, zookeeper_connect: str, port: int = 0, **overrides: str
    ) -> BrokerProcess:
        directory.mkdir(parents=True, exist_ok=True)
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(directory / "logs"),
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": "3000",
            "zookeeper.connection.timeout.ms": "10000",
        }
        # python-style keys (min_insync_replicas) become Kafka's; keys given with dots are kept as
        # they are (listener.name.sasl_ssl.plain.sasl.jaas.config has underscores of its own)
        props.update({(k if "." in k else k.replace("_", ".")): str(v) for k, v in overrides.items()})
        return cls(broker_id, directory, props)

    def start(self, timeout_s: float = 30.0, detached: bool = False) -> BrokerProcess:
        """Start and wait for readiness. `detached`: the broker outlives this process (its own
        session, stdout to `<directory>/stdout.log`), as `minikafka cluster up` needs."""
        command, env, log_file = self._prepare()
        if detached:
            stdout_path = self.directory / "stdout.log"
            stdout_path.write_text("")
            with open(stdout_path, "a") as out:
                self.process = subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=log_file,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=Path(__file__).resolve().parent.parent,
                    start_new_session=True,
                )
            log_file.close()
            return self._wait_ready_in_file(stdout_path, timeout_s)
        self._launch(command, env, log_file)
        return self._wait_ready(time.monotonic() + timeout_s, timeout_s)

    def _prepare(self) -> tuple[list[str], dict, IO[bytes]]:
        """Write `server.properties`; returns the broker's command line, its environment and
        its standard error log, opened for appending (`_launch` hands it over and closes it)."""
        config = self.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        log_file = open(self.directory / STDERR_LOG, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        command = [
            sys.executable,
            "-m",
            "minikafka_cli.main",
            "broker",
            "--config",
            str(config),
            "--log-file",
            str(self.directory / LOG),
        ]
        return command, env, log_file

    def _launch(self, command: list[str], env: dict, log_file) -> None:
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            text=True,
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )
        log_file.close()

    def _wait_ready(self, deadline: float, timeout_s: float) -> BrokerProcess:
        assert self.process is not None and self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    self.kill()
                    raise BrokerStartError(
                        f"broker {self.broker_id} did not start in {timeout_s} s:\n{self.log_tail()}"
                    )
                line = self.process.stdout.readline()
                if not line:
                    self.process.wait()
                    raise BrokerStartError(
                        f"broker {self.broker_id} exited with {self.process.returncode}:\n{self.log_tail()}"
                    )
                self.stdout_lines.append(line)
                if READY.search(line):
                    self._ready(line)
                    return self

    def _wait_ready_in_file(self, path: Path, timeout_s: float) -> BrokerProcess:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = READY.search(path.read_text(errors="replace"))
            if m:
                self._ready(m.group(0))
                return self
            if self.process.poll() is not None:
                raise BrokerStartError(
                    f"broker {self.broker_id} exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            time.sleep(0.05)
        self.kill()
        raise BrokerStartError(f"broker {self.broker_id} did not start in {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        """The end of what the broker wrote to standard error (start-up failures, crashes) and
        of its log (`broker.log`, rotated by the broker itself)."""
        out = ""
        for name in (STDERR_LOG, LOG):
            path = self.directory / name
            if path.exists():
                out += path.read_text(errors="replace")[-chars:]
        return out[-chars:]

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None
