"""`KafkaCluster`: ZooKeeper and N minikafka brokers as real processes on 127.0.0.1, for tests.

    with KafkaCluster(brokers=3) as cluster:
        producer = confluent_kafka.Producer(cluster.client_config("confluent-kafka"))

Every process is started with `die_with_parent` (Linux's PR_SET_PDEATHSIG), so the cluster dies
with the process that started it even when that process is killed; `close()` (or leaving the
`with` block) stops it and removes its temporary directory.

Security modes (`security=`): `plaintext`, `ssl`, `sasl_plaintext`, `sasl_ssl` - the same as
`minikafka cluster up --security` (`local_cluster/secure.py`): one listener of that protocol,
ACLs on, and an `admin` super user whose settings `client_config()` gives per client.

Errors: `ClusterStartError` when ZooKeeper or a broker does not start or the cluster does not
become ready (with the process's last words); `KeyError` for an unknown broker id.
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from local_cluster import secure
from local_cluster.brokers import BrokerProcess, BrokerStartError, quickstart_settings, start_all
from local_cluster.zookeeper import ZooKeeperError, ZooKeeperProcess

SECURITY_MODES = secure.PROTOCOLS
#: a ZooKeeper the user runs (HOST:PORT), used instead of starting one (pytest --kafka-zookeeper)
ZOOKEEPER_ENV = "MINIKAFKA_ZOOKEEPER"
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "minikafka")


class ClusterStartError(RuntimeError):
    pass


def _signal(broker: BrokerProcess, signum: int) -> None:
    if broker.process is not None and broker.alive:
        os.kill(broker.process.pid, signum)


def _defaults(brokers: int) -> dict[str, str]:
    """Settings for a test cluster: Kafka's quickstart choices (`quickstart_settings`), topics
    replicated as far as the cluster allows, and small internal topics, which start faster."""
    return {
        **quickstart_settings(brokers),
        "default.replication.factor": str(min(3, brokers)),
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.num.partitions": "5",
        "metrics.port": "0",  # each broker's metrics and web console, on a port of its own
        "metrics.host": "127.0.0.1",
    }


class KafkaCluster:
    """ZooKeeper and `brokers` broker processes (ids 1..N). `broker_config`: Kafka broker keys
    applied to every broker, over the test defaults. `directory`: where logs and data go (a new
    temporary directory, removed at close, when None). `zookeeper`: HOST:PORT of a ZooKeeper
    already running (default: $MINIKAFKA_ZOOKEEPER): the cluster keeps its znodes under a chroot
    of its own there instead of starting ZooKeeper (plaintext only: a secured cluster's brokers
    log in to a ZooKeeper that requires SASL, which it starts itself). Raises ValueError for bad arguments."""

    def __init__(
        self,
        brokers: int = 1,
        *,
        security: str = "plaintext",
        broker_config: dict[str, str] | None = None,
        directory: str | os.PathLike | None = None,
        start_timeout_s: float = 60.0,
        zookeeper: str | None = None,
    ):
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if security not in SECURITY_MODES:
            raise ValueError(f"security must be one of {', '.join(SECURITY_MODES)}, not {security!r}")
        self.size = brokers
        self.security = security
        self.broker_config = {**_defaults(brokers), **(broker_config or {})}
        self.start_timeout_s = start_timeout_s
        self._own_directory = directory is None
        self.directory = Path(directory) if directory is not None else None
        self.zookeeper: ZooKeeperProcess | None = None
        # a ZooKeeper the user runs (host:port): this cluster lives under a chroot of its own there
        external = zookeeper or os.environ.get(ZOOKEEPER_ENV) or None
        self.external_zookeeper = f"{external.rstrip('/')}/minikafka-{uuid.uuid4().hex[:12]}" if external else None
        if self.external_zookeeper and security != "plaintext":  # secured clusters log in to ZooKeeper
            raise ValueError(
                f"security={security} needs a ZooKeeper of its own (with SASL logins): do not set {ZOOKEEPER_ENV}"
            )
        self.brokers: dict[int, BrokerProcess] = {}
        self.setup: secure.SecureSetup | None = None
        self.started_in_s: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, broker_id: int | None = None) -> KafkaCluster:
        """Without `broker_id`: start ZooKeeper and every broker, then wait until Metadata shows
        all of them and a controller; raises ClusterStartError (and cleans up) on failure. With
        `broker_id`: start that killed or stopped broker again, on the same ports and log
        directories, and wait until it is registered (BrokerStartError, TimeoutError). Returns self."""
        if broker_id is not None:
            self._restart(broker_id)
            self.admin().wait_for_brokers(self.size, self.start_timeout_s)
            return self
        started = time.monotonic()
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="minikafka-test-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            overrides = dict(self.broker_config)
            if self.security != "plaintext":
                self.setup = secure.prepare(self.directory, self.security)
                overrides.update(self.setup.broker_overrides)
                overrides["listeners"] = f"{self.setup.protocol}://127.0.0.1:0"
            connect = self.external_zookeeper
            if connect is None:
                self.zookeeper = ZooKeeperProcess.start(
                    self.directory / "zookeeper",
                    sasl_users=self.setup.zookeeper_users if self.setup else None,
                    die_with_parent=True,
                )
                connect = self.zookeeper.connect
                if self.setup is not None:
                    secure.write_admin_credentials(connect, self.setup)
            for broker_id in range(1, self.size + 1):
                broker = BrokerProcess.create(broker_id, self.directory / f"broker-{broker_id}", connect)
                broker.properties.update(overrides)
                broker.die_with_parent = True
                self.brokers[broker_id] = broker
            start_all(list(self.brokers.values()), self.start_timeout_s)
            self.admin().wait_for_brokers(self.size, self.start_timeout_s)
        except (ZooKeeperError, BrokerStartError, TimeoutError) as e:
            self.close()
            raise ClusterStartError(f"the test cluster did not start: {e}") from None
        except BaseException:
            self.close()
            raise
        self.started_in_s = time.monotonic() - started
        return self

    def close(self) -> None:
        """Kill every broker, stop ZooKeeper, remove the temporary directory. Idempotent."""
        for broker in self.brokers.values():
            _signal(broker, signal.SIGCONT)  # a paused broker cannot die otherwise
            broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()
        if self._own_directory and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- failures ----------------------------------------------------------------------------

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker (a crash: no controlled shutdown)."""
        broker = self.brokers[broker_id]
        self.resume(broker_id)
        broker.kill()

    def stop(self, broker_id: int) -> int:
        """SIGTERM one broker and wait: controlled shutdown moves its leaderships first. Its exit status."""
        self.resume(broker_id)
        return self.brokers[broker_id].stop()

    def _restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.alive:
            return
        broker.stdout_lines.clear()
        broker.start(self.start_timeout_s)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP one broker: it keeps its connections and ZooKeeper session but answers nothing,
        so its followers fall out of the ISR after replica.lag.time.max.ms."""
        _signal(self.brokers[broker_id], signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        _signal(self.brokers[broker_id], signal.SIGCONT)

    def heal(self, timeout_s: float = 60.0) -> None:
        """Resume paused brokers, start dead ones, and wait until all are registered again
        (the fixture calls this after every test, so one test's failures do not leak into the next)."""
        for broker_id, broker in self.brokers.items():
            if broker.alive:
                self.resume(broker_id)
            else:
                self._restart(broker_id)
        self.admin().wait_for_brokers(self.size, timeout_s)

    # -- clients -----------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,...` of every broker (those started at least once)."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def console_url(self, broker_id: int = 1) -> str:
        """The web console of one broker (served on its metrics port; over TLS when the listeners use it)."""
        broker = self.brokers[broker_id]
        scheme = "https" if self.security in ("ssl", "sasl_ssl") else "http"
        return f"{scheme}://{broker.host}:{broker.metrics_port}/"

    def client_config(self, client: str = "confluent-kafka") -> dict[str, Any]:
        """Bootstrap servers and, under security, the `admin` super user's settings, in the keys
        of `client`: confluent-kafka (librdkafka's dotted keys), kafka-python and aiokafka
        (keyword arguments), or minikafka (Kafka's Java client keys, for `security.config`)."""
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, not {client!r}")
        rd = self.setup.librdkafka if self.setup else {}
        if client == "confluent-kafka":
            return {"bootstrap.servers": self.bootstrap_servers, **rd}
        if client == "minikafka":
            return {"bootstrap.servers": self.bootstrap_servers, **(self.setup.client_properties if self.setup else {})}
        out: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        if not rd:
            return out
        out["security_protocol"] = rd["security.protocol"]
        if "sasl.mechanism" in rd:
            out |= {
                "sasl_mechanism": rd["sasl.mechanism"],
                "sasl_plain_username": rd["sasl.username"],
                "sasl_plain_password": rd["sasl.password"],
            }
        if "ssl.ca.location" in rd:
            cert, key = rd.get("ssl.certificate.location"), rd.get("ssl.key.location")
            if client == "kafka-python":
                out["ssl_cafile"] = rd["ssl.ca.location"]
                if cert:
                    out |= {"ssl_certfile": cert, "ssl_keyfile": key}
            else:  # aiokafka takes an SSLContext
                context = ssl.create_default_context(cafile=rd["ssl.ca.location"])
                if cert:
                    context.load_cert_chain(cert, key)
                out["ssl_context"] = context
        return out

    def client_security(self):
        """The admin's settings for minikafka's own client (`client.cluster.Cluster.open(security=)`),
        or None in plaintext."""
        from security.config import client_security

        return client_security(self.setup.client_properties) if self.setup else None

    def admin(self):
        """A blocking admin helper on this cluster (`minikafka.testing.Admin`)."""
        from minikafka.testing.admin import Admin

        return Admin(self.bootstrap_servers, self.client_security())
