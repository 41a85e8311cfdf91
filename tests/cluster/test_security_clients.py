"""TLS listeners and SASL authentication judged by unmodified clients (confluent-kafka, kafka-python,
aiokafka, kcat) against real brokers whose inter-broker traffic is SASL_SSL: every way in works
with the right credentials, and is refused (connection closed, nothing served) with wrong ones."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest
from admin_helpers import wait
from security_helpers import ADMIN, confluent, secured_broker

from local_cluster.pki import make_pki

pytestmark = pytest.mark.slow
TIMEOUT = 60


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


def _admin(broker, pki):
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": broker.endpoint("SASL_SSL"), **confluent("SASL_SSL", pki, "PLAIN", *ADMIN)}
    )


PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
#: (listener / security.protocol, SASL mechanism, user: the SASL user, or the certificate's name for SSL)
WAYS = [
    ("SSL", None, "dave"),
    ("SASL_PLAINTEXT", "PLAIN", "alice"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "carol"),
    ("SASL_SSL", "SCRAM-SHA-512", "carol"),
    ("SASL_SSL", "PLAIN", "alice"),
]
N = 5


def _ssl_context(pki, way):
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    if way[0] == "SSL":
        context.load_cert_chain(*(str(p) for p in pki.client_certificate(way[2])))
    return context


def _python_kwargs(pki, way) -> dict:
    """kafka-python's and aiokafka's (same) security arguments."""
    protocol, mechanism, user = way
    kwargs: dict = {"security_protocol": protocol}
    if "SSL" in protocol:
        kwargs["ssl_context"] = _ssl_context(pki, way)
    if mechanism is not None:
        kwargs.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=PASSWORDS[user])
    return kwargs


def _rdkafka(pki, way) -> dict:
    protocol, mechanism, user = way
    return confluent(protocol, pki, mechanism, user, PASSWORDS.get(user), cert=user if protocol == "SSL" else None)


def _confluent(bootstrap, pki, way, topic) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = _rdkafka(pki, way)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    for i in range(N):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, **conf})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) == N:
                break
    finally:
        consumer.close()
    return got


def _kafka_python(bootstrap, pki, way, topic) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **_python_kwargs(pki, way))
    for i in range(N):
        producer.send(topic, f"{topic}-{i}".encode())
    producer.flush(TIMEOUT)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000, **_python_kwargs(pki, way))
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(N), consumer)]
    consumer.close()
    return got


def _aiokafka(bootstrap, pki, way, topic) -> list[bytes]:
    import asyncio

    async def main() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **_python_kwargs(pki, way))
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait(topic, f"{topic}-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **_python_kwargs(pki, way))
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            while len(got) < N:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(main())


def _kcat(bootstrap, pki, way, topic) -> list[bytes]:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    args = [kcat, "-b", bootstrap] + [x for k, v in _rdkafka(pki, way).items() for x in ("-X", f"{k}={v}")]
    lines = "".join(f"{topic}-{i}\n" for i in range(N))
    subprocess.run(args + ["-P", "-t", topic, "-X", "acks=all"], input=lines, text=True, check=True, timeout=TIMEOUT)
    out = subprocess.run(
        args + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True, text=True, timeout=TIMEOUT
    )
    return [line.encode() for line in out.stdout.split()]


CLIENTS = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka, "kcat": _kcat}


def test_a_secured_cluster_serves_every_client_over_every_protocol(start_broker, pki):
    from confluent_kafka.admin import NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    brokers = {i: start_broker(i, **secured_broker(pki)) for i in (1, 2, 3)}
    admin = _admin(brokers[1], pki)
    wait(lambda: (md := admin.list_topics(timeout=TIMEOUT)).controller_id >= 0 and len(md.brokers) == 3, "3 brokers")
    # SCRAM users made through AlterUserScramCredentials, over SASL_SSL as the PLAIN admin
    upserts = [
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret"),
    ]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(TIMEOUT)
    described = {u: f.result(TIMEOUT) for u, f in admin.describe_user_scram_credentials(["bob", "carol"]).items()}
    assert described["carol"].scram_credential_infos[0].iterations == 8192
    topics = {(client, way): f"{client}-{way[0]}-{way[1] or 'cert'}".lower() for client in CLIENTS for way in WAYS}
    for f in admin.create_topics([NewTopic(t, 1, 3) for t in topics.values()]).values():
        f.result(TIMEOUT)
    b = brokers[2]
    # the listener a client came in on is the one Metadata advertises
    md = _admin(b, pki).list_topics(timeout=TIMEOUT)
    assert {(m.id, f"{m.host}:{m.port}") for m in md.brokers.values()} == {
        (i, x.endpoint("SASL_SSL")) for i, x in brokers.items()
    }
    failures = {}
    for (client, way), topic in topics.items():
        try:
            got = CLIENTS[client](b.endpoint(way[0]), pki, way, topic)
        except Exception as e:  # collect every way that fails, not only the first
            failures[topic] = f"{type(e).__name__}: {e}"
            continue
        if sorted(got) != [f"{topic}-{i}".encode() for i in range(N)]:
            failures[topic] = f"read back {got}"
    assert not failures, failures


def test_wrong_credentials_and_garbage_handshakes_are_refused(start_broker, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    b = start_broker(1, **secured_broker(pki))
    wait(lambda: _admin(b, pki).list_topics(timeout=TIMEOUT).controller_id >= 0, "a controller")
    refused = {
        "wrong password": ("SASL_SSL", confluent("SASL_SSL", pki, "PLAIN", "alice", "nope")),
        "unknown user": ("SASL_PLAINTEXT", confluent("SASL_PLAINTEXT", pki, "SCRAM-SHA-256", "mallory", "x")),
        "no client certificate": ("SSL", confluent("SSL", pki)),
    }
    for why, (listener, conf) in refused.items():
        client = AdminClient({"bootstrap.servers": b.endpoint(listener), **conf})
        with pytest.raises(KafkaException) as failure:
            client.list_topics(timeout=5)
        assert failure.value.args[0].code() in (-195, -185, -169), why  # _AUTHENTICATION, _TRANSPORT, _TIMED_OUT
    # garbage, truncated and oversize handshakes on the TLS and SASL listeners: closed, nothing else
    import os
    import socket
    import struct

    for listener, payload in (
        ("SSL", os.urandom(3000)),
        ("SSL", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),  # a ClientHello cut short
        ("SASL_SSL", b"GET / HTTP/1.1\r\n\r\n"),
        ("SASL_PLAINTEXT", struct.pack(">i", 600000) + os.urandom(600000)),  # an oversize SASL token
        ("SASL_PLAINTEXT", struct.pack(">ihhi", 12, 36, 2, 7)),  # SaslAuthenticate before any handshake
        ("SASL_PLAINTEXT", os.urandom(64)),
    ):
        host, port = b.endpoints[listener]
        with socket.create_connection((host, port), timeout=10) as s:
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):
                    pass  # the broker answers at most an error, then closes
            except OSError:
                pass  # reset by the broker: also a close
    assert b.process.poll() is None
    assert _admin(b, pki).list_topics(timeout=TIMEOUT).controller_id >= 0  # still serving
    log = (b.directory / "broker.log").read_text()
    assert "Authentication failed: Invalid username or password" in log
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in log
    assert "TLS handshake failed" in log
    assert "Traceback" not in log
