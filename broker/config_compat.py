"""The rest of Kafka 3.8's `KafkaConfig`: keys whose mechanism minikafka does not have, each with
what minikafka does with it and why (issue 38: every key Kafka knows is known here).

Two treatments, both with Kafka's type check of the value:
- accepted, no effect: Kafka's own meaning has nothing to act on here (a JVM thread pool, a
  Kerberos login, KRaft's quorum timers in ZooKeeper mode, a tiered-storage knob with tiered
  storage off). Shown by DescribeConfigs with the reason as documentation;
- refused unless Kafka's default: setting it would ask for a mechanism minikafka lacks (KRaft
  mode, tiered storage, a Java plugin class, SASL re-authentication). The broker refuses to start
  with it, and AlterConfigs answers INVALID_CONFIG, with the reason.

`dynamic`: Kafka may change the key at runtime (`DynamicBrokerConfig.AllDynamicConfigs`), so
AlterConfigs on a broker accepts it here too (and refuses a refused key's non-default value).
Source: Kafka 3.8 `KafkaConfig.configDef` and the config classes it gathers (`ZkConfigs`,
`KRaftConfigs`, `SocketServerConfigs`, `ServerLogConfigs`, `RemoteLogManagerConfig`, `SslConfigs`,
`SaslConfigs`, `BrokerSecurityConfigs`, `DelegationTokenManagerConfigs`, `PasswordEncoderConfigs`,
`QuotaConfigs`, `ReplicationConfigs`, `GroupCoordinatorConfig`, `TransactionLogConfigs`).
"""

from __future__ import annotations

from dataclasses import dataclass

INT_MAX = "2147483647"
LONG_MAX = "9223372036854775807"


@dataclass(frozen=True, slots=True)
class CompatKey:
    name: str
    type: str  # Kafka's type name: int, long, double, boolean, string, list, password, class, short
    default: str  # Kafka's default as a string ("" for null)
    reason: str  # what minikafka does with it, and why
    dynamic: bool = False
    refused: bool = False  # True: only Kafka's default (or an empty value) is accepted


def _group(reason: str, keys: list[tuple[str, str, str]], *, dynamic=(), refused=False) -> list[CompatKey]:
    return [CompatKey(n, t, d, reason, n in dynamic, refused) for n, t, d in keys]


_THREADS = "Accepted, no effect: trio needs no thread pool of this kind."
_JVM = "Accepted, no effect: a JVM setting (Python's ssl module and OpenSSL choose these)."
_KERBEROS = "Accepted, no effect: minikafka has no GSSAPI (Kerberos) login to refresh."
_OAUTH = "Accepted, no effect: minikafka offers PLAIN and SCRAM, not OAUTHBEARER."
_KRAFT = "Accepted, no effect: a KRaft setting; minikafka runs in ZooKeeper mode, where Kafka ignores it too."
_KRAFT_REFUSED = "Refused unless empty: minikafka runs in ZooKeeper mode only (no KRaft quorum)."
_TIERED = "Accepted, no effect: tiered storage (KIP-405) is off, as remote.log.storage.system.enable must be."
_ZK_TLS = (
    "Accepted, no effect while zookeeper.ssl.client.enable is false (minikafka reaches ZooKeeper in plaintext or SASL)."
)
_PLUGIN = "Refused unless empty: a Java class to load; minikafka cannot load Java plugins."
_SOCKET = (
    "Accepted, no effect: the operating system's defaults size sockets and queues; timeouts come from each request."
)
_HOUSEKEEPING = (
    "Accepted, no effect: Kafka's internal housekeeping interval; minikafka's delayed operations and caches need none."
)
_TOKENS = (
    "Accepted, no effect: delegation tokens are off while delegation.token.secret.key is empty, and minikafka has none."
)
_QUOTA_WINDOWS = (
    "Accepted, no effect: replication, log-dir and controller mutation quotas are not enforced by minikafka."
)
_METRICS = "Accepted, no effect: minikafka's metrics are Prometheus gauges on metrics.port, not Kafka Metrics or JMX."

COMPAT_KEYS: list[CompatKey] = [
    *_group(_THREADS, [("num.replica.alter.log.dirs.threads", "int", ""), ("group.coordinator.threads", "int", "1")]),
    *_group(
        _JVM,
        [
            ("ssl.protocol", "string", "TLSv1.3"),
            ("ssl.provider", "string", ""),
            ("ssl.keymanager.algorithm", "string", "SunX509"),
            ("ssl.trustmanager.algorithm", "string", "PKIX"),
            ("ssl.secure.random.implementation", "string", ""),
            ("ssl.allow.dn.changes", "boolean", "false"),
            ("ssl.allow.san.changes", "boolean", "false"),
        ],
        dynamic={"ssl.protocol", "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm"}
        | {"ssl.secure.random.implementation"},
    ),
    *_group(
        "Refused unless empty: Kafka names cipher suites as the JVM does; minikafka uses OpenSSL's defaults for the enabled TLS versions.",
        [("ssl.cipher.suites", "list", "")],
        dynamic={"ssl.cipher.suites"},
        refused=True,
    ),
    *_group(
        _PLUGIN,
        [
            ("ssl.engine.factory.class", "class", ""),
            ("principal.builder.class", "class", ""),
            ("sasl.server.callback.handler.class", "class", ""),
            ("sasl.client.callback.handler.class", "class", ""),
            ("sasl.login.class", "class", ""),
            ("sasl.login.callback.handler.class", "class", ""),
            ("security.providers", "string", ""),
            ("create.topic.policy.class.name", "class", ""),
            ("alter.config.policy.class.name", "class", ""),
            ("client.quota.callback.class", "class", ""),
            ("kafka.metrics.reporters", "list", ""),
        ],
        dynamic={"ssl.engine.factory.class", "principal.builder.class"},
        refused=True,
    ),
    *_group(
        "Accepted when empty or Kafka's JmxReporter (no effect: metrics are served as Prometheus gauges on metrics.port); other Java reporters are refused.",
        [("metric.reporters", "list", "")],
        dynamic={"metric.reporters"},
        refused=True,
    ),
    *_group(
        _METRICS,
        [
            ("metrics.num.samples", "int", "2"),
            ("metrics.sample.window.ms", "long", "30000"),
            ("metrics.recording.level", "string", "INFO"),
            ("kafka.metrics.polling.interval.secs", "int", "10"),
            ("auto.include.jmx.reporter", "boolean", "true"),
            ("telemetry.max.bytes", "int", "1048576"),
        ],
    ),
    *_group(
        _KERBEROS,
        [
            ("sasl.kerberos.service.name", "string", ""),
            ("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit"),
            ("sasl.kerberos.ticket.renew.window.factor", "double", "0.8"),
            ("sasl.kerberos.ticket.renew.jitter", "double", "0.05"),
            ("sasl.kerberos.min.time.before.relogin", "long", "60000"),
            ("sasl.kerberos.principal.to.local.rules", "list", "DEFAULT"),
            ("sasl.login.refresh.window.factor", "double", "0.8"),
            ("sasl.login.refresh.window.jitter", "double", "0.05"),
            ("sasl.login.refresh.min.period.seconds", "short", "60"),
            ("sasl.login.refresh.buffer.seconds", "short", "300"),
        ],
        dynamic={
            "sasl.kerberos.service.name",
            "sasl.kerberos.kinit.cmd",
            "sasl.kerberos.ticket.renew.window.factor",
            "sasl.kerberos.ticket.renew.jitter",
            "sasl.kerberos.min.time.before.relogin",
            "sasl.kerberos.principal.to.local.rules",
            "sasl.login.refresh.window.factor",
            "sasl.login.refresh.window.jitter",
            "sasl.login.refresh.min.period.seconds",
            "sasl.login.refresh.buffer.seconds",
        },
    ),
    *_group(
        _OAUTH,
        [
            ("sasl.login.connect.timeout.ms", "int", ""),
            ("sasl.login.read.timeout.ms", "int", ""),
            ("sasl.login.retry.backoff.ms", "long", "100"),
            ("sasl.login.retry.backoff.max.ms", "long", "10000"),
            ("sasl.oauthbearer.scope.claim.name", "string", "scope"),
            ("sasl.oauthbearer.sub.claim.name", "string", "sub"),
            ("sasl.oauthbearer.token.endpoint.url", "string", ""),
            ("sasl.oauthbearer.jwks.endpoint.url", "string", ""),
            ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", "3600000"),
            ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", "100"),
            ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", "10000"),
            ("sasl.oauthbearer.clock.skew.seconds", "int", "30"),
            ("sasl.oauthbearer.expected.audience", "list", ""),
            ("sasl.oauthbearer.expected.issuer", "string", ""),
        ],
    ),
    *_group(
        "Accepted, no effect: minikafka's SASL exchanges are bounded by socket.request.max.bytes.",
        [("sasl.server.max.receive.size", "int", "524288")],
    ),
    *_group(
        "Refused unless 0: minikafka does not re-authenticate connections (KIP-368); a session lasts as long as its connection.",
        [("connections.max.reauth.ms", "long", "0")],
        refused=True,
    ),
    *_group(
        "Refused unless Kafka's default (no limit): minikafka limits connections by max.connections and max.connections.per.ip, not by rate.",
        [("max.connection.creation.rate", "int", INT_MAX)],
        dynamic={"max.connection.creation.rate"},
        refused=True,
    ),
    *_group(
        _SOCKET,
        [
            ("socket.send.buffer.bytes", "int", "102400"),
            ("socket.receive.buffer.bytes", "int", "102400"),
            ("socket.listen.backlog.size", "int", "50"),
            ("request.timeout.ms", "int", "30000"),
            ("socket.connection.setup.timeout.ms", "long", "10000"),
            ("socket.connection.setup.timeout.max.ms", "long", "30000"),
            ("connection.failed.authentication.delay.ms", "int", "100"),
            ("controller.socket.timeout.ms", "int", "30000"),
            ("replica.socket.timeout.ms", "int", "30000"),
            ("replica.socket.receive.buffer.bytes", "int", "65536"),
            ("zookeeper.max.in.flight.requests", "int", "10"),
            ("fetch.max.bytes", "int", "57671680"),
        ],
    ),
    *_group(
        _HOUSEKEEPING,
        [
            ("fetch.purgatory.purge.interval.requests", "int", "1000"),
            ("producer.purgatory.purge.interval.requests", "int", "1000"),
            ("delete.records.purgatory.purge.interval.requests", "int", "1"),
            ("log.flush.start.offset.checkpoint.interval.ms", "int", "60000"),
            ("log.initial.task.delay.ms", "long", "30000"),
            ("producer.id.expiration.check.interval.ms", "int", "600000"),
            ("zookeeper.sync.time.ms", "int", "2000"),
        ],
    ),
    *_group(
        "Accepted, no effect: every replica of minikafka's broker speaks the newest protocol and record format it knows.",
        [
            ("inter.broker.protocol.version", "string", "3.8-IV0"),
            ("log.message.downconversion.enable", "boolean", "true"),
            ("offsets.commit.required.acks", "short", "-1"),
            ("unstable.api.versions.enable", "boolean", "false"),
            ("unstable.metadata.versions.enable", "boolean", "false"),
            ("group.coordinator.new.enable", "boolean", "false"),
        ],
    ),
    *_group(
        "Accepted, no effect: segments are not preallocated; the file system allocates as records arrive.",
        [("log.preallocate", "boolean", "false")],
        dynamic={"log.preallocate"},
    ),
    *_group(
        "Accepted, no effect: the leader-imbalance check moves every preferred leader back whose broker is alive.",
        [("leader.imbalance.per.broker.percentage", "int", "10")],
    ),
    *_group(
        "Accepted, no effect: broker.id is required, so minikafka never generates one.",
        [("broker.id.generation.enable", "boolean", "true"), ("reserved.broker.max.id", "int", "1000")],
    ),
    *_group(
        _QUOTA_WINDOWS,
        [
            ("replication.quota.window.num", "int", "11"),
            ("replication.quota.window.size.seconds", "int", "1"),
            ("alter.log.dirs.replication.quota.window.num", "int", "11"),
            ("alter.log.dirs.replication.quota.window.size.seconds", "int", "1"),
            ("controller.quota.window.num", "int", "11"),
            ("controller.quota.window.size.seconds", "int", "1"),
        ],
    ),
    *_group(
        _TOKENS,
        [
            ("delegation.token.max.lifetime.ms", "long", "604800000"),
            ("delegation.token.expiry.time.ms", "long", "86400000"),
            ("delegation.token.expiry.check.interval.ms", "long", "3600000"),
        ],
    ),
    *_group(
        "Refused unless empty: minikafka has no delegation tokens (KIP-48).",
        [("delegation.token.secret.key", "password", ""), ("delegation.token.master.key", "password", "")],
        refused=True,
    ),
    *_group(
        "Accepted, no effect: minikafka keeps dynamic passwords as given in ZooKeeper, which its ACLs protect.",
        [
            ("password.encoder.secret", "password", ""),
            ("password.encoder.old.secret", "password", ""),
            ("password.encoder.keyfactory.algorithm", "string", ""),
            ("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding"),
            ("password.encoder.key.length", "int", "128"),
            ("password.encoder.iterations", "int", "4096"),
        ],
    ),
    *_group(
        _ZK_TLS,
        [
            ("zookeeper.clientCnxnSocket", "string", ""),
            ("zookeeper.ssl.keystore.location", "string", ""),
            ("zookeeper.ssl.keystore.password", "password", ""),
            ("zookeeper.ssl.keystore.type", "string", ""),
            ("zookeeper.ssl.truststore.location", "string", ""),
            ("zookeeper.ssl.truststore.password", "password", ""),
            ("zookeeper.ssl.truststore.type", "string", ""),
            ("zookeeper.ssl.protocol", "string", "TLSv1.2"),
            ("zookeeper.ssl.enabled.protocols", "list", ""),
            ("zookeeper.ssl.cipher.suites", "list", ""),
            ("zookeeper.ssl.endpoint.identification.algorithm", "string", "HTTPS"),
            ("zookeeper.ssl.crl.enable", "boolean", "false"),
            ("zookeeper.ssl.ocsp.enable", "boolean", "false"),
        ],
    ),
    *_group(
        "Refused unless false: minikafka reaches ZooKeeper in plaintext or with SASL, not TLS.",
        [("zookeeper.ssl.client.enable", "boolean", "false")],
        refused=True,
    ),
    *_group(
        "Refused unless false: minikafka stays in ZooKeeper mode; there is no KRaft controller to migrate to (KIP-866).",
        [("zookeeper.metadata.migration.enable", "boolean", "false")],
        refused=True,
    ),
    *_group(
        _KRAFT_REFUSED,
        [
            ("process.roles", "list", ""),
            ("controller.listener.names", "string", ""),
            ("controller.quorum.voters", "list", ""),
            ("controller.quorum.bootstrap.servers", "list", ""),
        ],
        refused=True,
    ),
    *_group(
        "Refused unless -1 or broker.id's value: in ZooKeeper mode a broker's node id is its broker.id.",
        [("node.id", "int", "-1")],
    ),
    *_group(
        _KRAFT,
        [
            ("initial.broker.registration.timeout.ms", "int", "60000"),
            ("broker.heartbeat.interval.ms", "int", "2000"),
            ("broker.session.timeout.ms", "int", "9000"),
            ("metadata.log.dir", "string", ""),
            ("metadata.log.max.record.bytes.between.snapshots", "long", "20971520"),
            ("metadata.log.max.snapshot.interval.ms", "long", "3600000"),
            ("metadata.log.segment.min.bytes", "int", "8388608"),
            ("metadata.log.segment.bytes", "int", "1073741824"),
            ("metadata.log.segment.ms", "long", "604800000"),
            ("metadata.max.retention.bytes", "long", "104857600"),
            ("metadata.max.retention.ms", "long", "604800000"),
            ("metadata.max.idle.interval.ms", "int", "500"),
            ("sasl.mechanism.controller.protocol", "string", "GSSAPI"),
            ("controller.quorum.election.timeout.ms", "int", "1000"),
            ("controller.quorum.fetch.timeout.ms", "int", "2000"),
            ("controller.quorum.election.backoff.max.ms", "int", "1000"),
            ("controller.quorum.append.linger.ms", "int", "25"),
            ("controller.quorum.request.timeout.ms", "int", "2000"),
            ("controller.quorum.retry.backoff.ms", "int", "20"),
            ("zookeeper.metadata.migration.min.batch.size", "int", "200"),
            ("early.start.listeners", "string", ""),
            ("server.max.startup.time.ms", "long", LONG_MAX),
            ("log.dir.failure.timeout.ms", "long", "30000"),
            ("eligible.leader.replicas.enable", "boolean", "false"),
        ],
    ),
    *_group(
        "Refused unless false: minikafka has no tiered storage (KIP-405); segments stay in log.dirs.",
        [("remote.log.storage.system.enable", "boolean", "false")],
        refused=True,
    ),
    *_group(
        _TIERED,
        [
            ("remote.log.storage.manager.class.name", "string", ""),
            ("remote.log.storage.manager.class.path", "string", ""),
            ("remote.log.storage.manager.impl.prefix", "string", "rsm.config."),
            ("remote.log.metadata.manager.class.name", "string", ""),
            ("remote.log.metadata.manager.class.path", "string", ""),
            ("remote.log.metadata.manager.impl.prefix", "string", "rlmm.config."),
            ("remote.log.metadata.manager.listener.name", "string", ""),
            ("remote.log.metadata.custom.metadata.max.bytes", "int", "128"),
            ("remote.log.index.file.cache.total.size.bytes", "long", "1073741824"),
            ("remote.log.manager.thread.pool.size", "int", "10"),
            ("remote.log.manager.task.interval.ms", "long", "30000"),
            ("remote.log.manager.task.retry.backoff.ms", "long", "500"),
            ("remote.log.manager.task.retry.backoff.max.ms", "long", "30000"),
            ("remote.log.manager.task.retry.jitter", "double", "0.2"),
            ("remote.log.reader.threads", "int", "10"),
            ("remote.log.reader.max.pending.tasks", "int", "100"),
            ("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX),
            ("remote.log.manager.copy.quota.window.num", "int", "11"),
            ("remote.log.manager.copy.quota.window.size.seconds", "int", "1"),
            ("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX),
            ("remote.log.manager.fetch.quota.window.num", "int", "11"),
            ("remote.log.manager.fetch.quota.window.size.seconds", "int", "1"),
            ("remote.fetch.max.wait.ms", "int", "500"),
            ("log.local.retention.ms", "long", "-2"),
            ("log.local.retention.bytes", "long", "-2"),
        ],
        dynamic={
            "remote.log.index.file.cache.total.size.bytes",
            "remote.log.manager.copy.max.bytes.per.second",
            "remote.log.manager.fetch.max.bytes.per.second",
            "log.local.retention.ms",
            "log.local.retention.bytes",
        },
    ),
]

#: a refused key's values that are accepted beyond its default (and the empty value)
ALSO_ACCEPTED = {"metric.reporters": {"org.apache.kafka.common.metrics.JmxReporter"}}
