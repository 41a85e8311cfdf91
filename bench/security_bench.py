"""`make bench`, security part (issue 20's targets), on real broker processes driven by
confluent-kafka (librdkafka) producers:

1. SASL_SSL beside PLAINTEXT, in the same run: two 3-broker clusters one after the other, one all
   PLAINTEXT, one all SASL_SSL (clients and inter-broker traffic; SCRAM-SHA-512 clients, PLAIN
   between brokers, TLS 1.3). On each: `PRODUCERS` producer processes send 100-byte records for a
   fixed time to a topic of 6 partitions, RF 3, min.insync.replicas 2, acks=all (linger 5 ms).
   Reported: records/s, produce p99 (delivery report latency) and the brokers' CPU (cores).
   Target: SASL_SSL keeps >= 70% of PLAINTEXT's throughput.
2. The authorizer's cost: one producer offering a fixed 4,000 records/s at `linger.ms=0` (small
   requests) on a PLAINTEXT cluster with the ACL authorizer off and on, twice each, interleaved (the principal allowed by topic and cluster ACLs, among 200
   others); reported: broker CPU microseconds per acknowledged record. Target: authorization adds < 5%.

The machine's cores are shared by brokers and producers, so the table gives both CPU figures.

Results: a markdown table (measured vs target) printed, written to `bench/results/security.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:security` markers.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench import targets
from bench.txn_bench import _cpu_s
from local_cluster.brokers import BrokerProcess
from local_cluster.pki import make_pki
from local_cluster.zookeeper import ZooKeeperProcess

PRODUCERS = 4
AUTHZ_RATE = 4000  # records/s offered by the one producer of the authorizer measurement
TOPIC, PARTITIONS = "bench-security", 6
ADMIN = ("admin", "admin-secret")


def _producer_process(bootstrap: str, conf: dict, seconds: float, linger_ms: int, rate: int | None, out) -> None:
    """Send 100-byte records for `seconds`, as fast as possible or `rate` per second, then wait
    for every delivery report; puts (acknowledged, p99 s, elapsed s, CPU s) on `out`."""
    from confluent_kafka import Producer

    latencies: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "queue.buffering.max.messages": 200000,
            **conf,
        }
    )

    def delivered(err, msg, started=None) -> None:
        if err is None and started is not None:
            latencies.append(time.monotonic() - started)

    value = b"x" * 100
    stop_at = time.monotonic() + seconds
    done = 0
    while (started := time.monotonic()) < stop_at:
        if rate is not None and done >= rate * (started - stop_at + seconds):
            producer.poll(0.001)  # ahead of the offered rate
            continue
        try:
            producer.produce(TOPIC, value, on_delivery=lambda e, m, s=started: delivered(e, m, s))
            done += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    elapsed = time.monotonic() - (stop_at - seconds)  # until the last delivery report
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("inf")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out.put((len(latencies), p99, elapsed, usage.ru_utime + usage.ru_stime))


def produce_load(
    bootstrap: str, conf: dict, seconds: float, producers: int, linger_ms: int = 5, rate: int | None = None
) -> tuple[float, float, float, int]:
    """(acknowledged records/s, p99 ms, the producers' CPU in cores, acknowledged records) of
    `producers` processes, each sending for `seconds` (at most `rate` records/s each) and then
    waiting for its last delivery report (the rate counts that wait)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_producer_process, args=(bootstrap, conf, seconds, linger_ms, rate, out))
        for _ in range(producers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 180) for _ in procs]
    for p in procs:
        p.join(30)
    elapsed = max(r[2] for r in results)
    acked = sum(r[0] for r in results)
    return acked / elapsed, 1000 * max(r[1] for r in results), sum(r[3] for r in results) / elapsed, acked


def _jaas() -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-secret" user_broker="broker-secret";'
    )


def _start(root: Path, zk: ZooKeeperProcess, props: dict) -> dict[int, BrokerProcess]:
    return {i: BrokerProcess.create(i, root / f"b{i}", zk.connect, **props).start() for i in (1, 2, 3)}


def _admin(bootstrap: str, conf: dict):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    deadline = time.monotonic() + 60
    # a controller, and all 3 brokers registered (RF 3 topics follow)
    while ((md := admin.list_topics(timeout=60)).controller_id < 0 or len(md.brokers) < 3) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
    return admin


def _cluster_run(root: Path, props: dict, client_conf: dict, listener: str, work) -> tuple:
    zk = ZooKeeperProcess.start(root / "zk")
    brokers: dict[int, BrokerProcess] = {}
    try:
        brokers = _start(root, zk, props)
        bootstrap = ",".join(b.endpoint(listener) for b in brokers.values())
        admin = _admin(bootstrap, client_conf)
        pids = [b.process.pid for b in brokers.values()]
        return work(bootstrap, admin, pids)
    finally:
        for b in brokers.values():
            b.kill()
        zk.stop()


def _load_with_cpu(
    bootstrap: str, conf: dict, pids: list[int], seconds: float, producers: int, linger_ms: int = 5, rate=None
):
    """(records/s, p99 ms, brokers' cores, brokers' CPU microseconds per acknowledged record,
    producers' cores)."""
    before, started = _cpu_s(pids), time.monotonic()
    acked_rate, p99, client_cores, acked = produce_load(bootstrap, conf, seconds, producers, linger_ms, rate)
    used = _cpu_s(pids) - before
    return acked_rate, p99, used / (time.monotonic() - started), 1e6 * used / max(acked, 1), client_cores


def run(quick: bool) -> list[tuple[str, str, str, bool]]:
    seconds = 1 if quick else 20  # --quick's numbers mean nothing: it keeps the script working, in 4 cluster starts
    producers = 2 if quick else PRODUCERS
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pki = make_pki(root / "pki")
        plain = _cluster_run(
            root / "plaintext",
            {"listeners": "PLAINTEXT://127.0.0.1:0"},
            {},
            "PLAINTEXT",
            lambda b, admin, pids: _load_with_cpu(b, {}, pids, seconds, producers),
        )
        secured_props = {
            "listeners": "SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(),
            "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.truststore.location": str(pki.ca_file),
        }
        tls = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca_file),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "broker",
            "sasl.password": "broker-secret",
        }

        def secured_work(bootstrap, admin, pids):
            from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
            upsert = UserScramCredentialUpsertion("bench", info, b"bench-secret")
            for f in admin.alter_user_scram_credentials([upsert]).values():
                f.result(60)
            time.sleep(1)  # the change notification reaches every broker
            conf = {**tls, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-secret"}
            return _load_with_cpu(bootstrap, conf, pids, seconds, producers)

        secured = _cluster_run(root / "sasl-ssl", secured_props, tls, "SASL_SSL", secured_work)
        for name, (rate, p99, cores, _, client_cores) in (
            ("PLAINTEXT", plain),
            ("SASL_SSL (SCRAM-SHA-512, TLS 1.3)", secured),
        ):
            rows.append(
                (
                    f"RF-3 acks=all, 100 B records, {producers} producers, {name}",
                    f"{rate:,.0f} records/s, p99 {p99:.1f} ms, CPU: brokers {cores:.2f} cores,"
                    f" producers {client_cores:.2f} cores",
                    "-",
                    True,
                )
            )
        ratio = secured[0] / plain[0] if plain[0] else 0.0
        rows.append(("SASL_SSL throughput / PLAINTEXT throughput", f"{ratio:.0%}", ">= 70%", ratio >= 0.70))

        def per_request(authorizer: bool, run: int):
            props = {"listeners": "PLAINTEXT://127.0.0.1:0"}
            if authorizer:
                # open until the ACLs exist (the topic and cluster ACLs below then decide every check)
                props |= {
                    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                    "allow.everyone.if.no.acl.found": "true",
                }

            def work(bootstrap, admin, pids):
                if authorizer:  # ANONYMOUS (clients and brokers here) allowed by ACLs, among 200 unrelated ones
                    from confluent_kafka.admin import (
                        AclBinding,
                        AclOperation,
                        AclPermissionType,
                        ResourcePatternType,
                        ResourceType,
                    )

                    def acl(kind, name, principal, op):
                        return AclBinding(
                            kind, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
                        )

                    acls = [acl(ResourceType.TOPIC, f"other-{i}", f"User:u{i}", AclOperation.READ) for i in range(200)]
                    acls += [
                        acl(ResourceType.TOPIC, TOPIC, "User:ANONYMOUS", AclOperation.ALL),
                        # confluent-kafka names Kafka's CLUSTER resource type BROKER
                        acl(ResourceType.BROKER, "kafka-cluster", "User:ANONYMOUS", AclOperation.ALL),
                    ]
                    for f in admin.create_acls(acls).values():
                        f.result(60)
                    time.sleep(1)
                # a fixed offered load the brokers keep up with, so CPU per record is not queueing
                return _load_with_cpu(bootstrap, {}, pids, seconds, 1, linger_ms=0, rate=AUTHZ_RATE)[3]

            return _cluster_run(root / f"authz-{authorizer}-{run}", props, {}, "PLAINTEXT", work)

        # interleaved twice, the median of each side: one cluster start to the next varies
        runs = [per_request(authorizer, i) for i in range(1 if quick else 2) for authorizer in (False, True)]
        off, on = statistics.median(runs[0::2]), statistics.median(runs[1::2])
        extra = on / off - 1 if off else 0.0
        rows.append(
            (
                f"broker CPU per acknowledged record, 1 producer offering {AUTHZ_RATE:,}/s at linger.ms=0 "
                "(small requests), authorizer off / on",
                f"{off:,.0f} / {on:,.0f} us ({extra:+.1%})",
                "< +5%",
                extra < 0.05,
            )
        )
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 20, "security")


if __name__ == "__main__":
    raise SystemExit(main())
