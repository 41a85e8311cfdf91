"""Issue 49: the CLI as Kafka's tools are typed (kafka-topics, kafka-consumer-groups,
kafka-console-consumer), every subcommand with its own help, and errors in words, never a Python
repr. One shared cluster (the `minikafka.testing` plugin's `kafka_cluster`) for the module: no
test changes its shape."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
#: a Python repr in a message: `ConfigResource(type=...`, `DeleteGroups(live)`, `{'a': 1}`, `b'x'`
PYTHON_REPR = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*\(|\b\w+\(\w+=|\bb'|\{'")


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )


def out(r: subprocess.CompletedProcess) -> str:
    return r.stdout.decode()


def err(r: subprocess.CompletedProcess) -> str:
    return r.stderr.decode()


def test_topics_as_kafka_topics_sh_is_typed(kafka_cluster, kafka_topic, admin):
    bs = kafka_cluster.bootstrap_servers
    topic = kafka_topic(partitions=2)
    admin.produce(topic, ["x"])
    subprocess.run(  # a group commit creates __consumer_offsets, an internal topic
        [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", bs, "--topic", topic]
        + ["--group", "spellings", "--from-beginning", "--max-messages", "1"],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    listed = cli("topics", "--list", "--bootstrap-server", bs)
    assert listed.returncode == 0, err(listed)
    assert topic in out(listed).split() and "__consumer_offsets" in out(listed).split()
    external = cli("topics", "--bootstrap-server", bs, "--list", "--exclude-internal")
    assert topic in out(external).split() and "__consumer_offsets" not in out(external)
    assert out(cli("topics", "list", "--bootstrap-server", bs, "--topic", re.escape(topic))).split() == [topic]
    again = cli("topics", "--create", "--bootstrap-server", bs, "--topic", topic, "--if-not-exists")
    assert again.returncode == 0 and out(again) == "" and err(again) == "", err(again)
    assert cli("topics", "create", "--bootstrap-server", bs, "--topic", topic).returncode == 1
    gone = cli("topics", "delete", "--bootstrap-server", bs, "--topic", "never-was", "--if-exists")
    assert gone.returncode == 0, err(gone)
    healthy = cli("topics", "--describe", "--bootstrap-server", bs, "--topic", topic, "--under-replicated-partitions")
    assert healthy.returncode == 0 and out(healthy) == "", out(healthy)
    described = cli("topics", "describe", "--bootstrap-server", bs, "--topic", topic)
    assert f"Topic: {topic}\tPartitionCount: 2" in out(described)
    assert "all when omitted" not in out(cli("topics", "create", "--help"))
    altered = cli(
        "configs", "--alter", "--bootstrap-server", bs, "--topic", topic, "--add-config", "retention.ms=60000"
    )
    assert altered.returncode == 0, err(altered)
    shown = cli("configs", "--describe", "--bootstrap-server", bs, "--topic", topic)
    assert "retention.ms=60000" in out(shown), out(shown) + err(shown)


def test_each_groups_action_has_its_own_help_and_every_option_is_documented():
    pages = {action: out(cli("groups", action, "--help")) for action in ("list", "describe", "reset-offsets")}
    assert len(set(pages.values())) == 3
    assert pages["reset-offsets"].startswith("usage: minikafka groups reset-offsets")
    for option in ("--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--to-current", "--by-duration"):
        assert re.search(rf"^  {option}\b.*\n?.*reset-offsets: \w+", pages["reset-offsets"], re.M), option
    assert "--group GROUP" in pages["describe"] and "a consumer group" in pages["describe"]
    unknown = cli("groups", "describe", "--bootstrap-server", "127.0.0.1:1", "--nonsense")
    assert unknown.returncode == 2 and err(unknown).startswith("usage: minikafka groups describe"), err(unknown)


def test_groups_as_kafka_consumer_groups_sh_is_typed(kafka_cluster, kafka_topic, admin):
    bs = kafka_cluster.bootstrap_servers
    topic = kafka_topic(partitions=2)
    admin.produce(topic, [f"r{i}" for i in range(10)], partition=0)
    admin.produce(topic, [f"s{i}" for i in range(4)], partition=1)
    group = f"g-{topic}"
    missing = cli("groups", "--describe", "--bootstrap-server", bs, "--group", "never-existed")
    assert missing.returncode == 1 and err(missing).strip() == "Error: Consumer group 'never-existed' does not exist."
    first = cli("groups", "reset-offsets", "--bootstrap-server", bs, "--group", group)
    assert first.returncode == 2  # no spec, no topic
    done = cli(
        "groups",
        "--reset-offsets",
        "--bootstrap-server",
        bs,
        "--group",
        group,
        "--topic",
        f"{topic}:0",
        "--to-offset",
        "4",
        "--execute",
    )
    assert done.returncode == 0, err(done)
    assert admin.committed(group) == {(topic, 0): 4}
    current = cli(
        "groups", "reset-offsets", "--bootstrap-server", bs, "--group", group, "--topic", topic, "--to-current"
    )
    rows = [line.split() for line in out(current).splitlines() if line.startswith(group)]
    assert sorted((int(p), int(o)) for _, _, p, o in rows) == [(0, 4), (1, 4)], out(current)  # 1: none: the latest
    hour = cli(
        "groups",
        "reset-offsets",
        "--bootstrap-server",
        bs,
        "--group",
        group,
        "--topic",
        f"{topic}:0,1",
        "--by-duration",
        "PT1H",
        "--execute",
    )
    assert hour.returncode == 0, err(hour)
    assert admin.committed(group) == {(topic, 0): 0, (topic, 1): 0}  # every record is younger than an hour
    bad_topic = cli(
        "groups", "reset-offsets", "--bootstrap-server", bs, "--group", group, "--topic", f"{topic}:x", "--to-latest"
    )
    assert bad_topic.returncode == 2 and "partitions must be numbers" in err(bad_topic)
    no_such = cli(
        "groups", "reset-offsets", "--bootstrap-server", bs, "--group", group, "--topic", f"{topic}:7", "--to-latest"
    )
    assert no_such.returncode == 1 and "not 7" in err(no_such), err(no_such)
    # committed offsets of a deleted topic stay until they expire: shown without a log end
    gone = kafka_topic(partitions=1)
    admin.produce(gone, ["x"])
    reset = cli("groups", "reset-offsets", "--bootstrap-server", bs, "--group", f"{group}-gone", "--topic", gone)
    assert cli(*reset.args[3:], "--to-latest", "--execute").returncode == 0
    admin.delete_topic(gone)
    orphan = cli("groups", "describe", "--bootstrap-server", bs, "--group", f"{group}-gone")
    assert orphan.returncode == 0, err(orphan)
    assert [line.split()[1:6] for line in out(orphan).splitlines() if line.startswith(group)] == [
        [gone, "0", "1", "-", "-"]
    ], out(orphan)
    described = cli("groups", "describe", "--bootstrap-server", bs, "--all-groups", "--offsets")
    assert described.returncode == 0 and group in out(described), err(described)
    listed = cli("groups", "--list", "--bootstrap-server", bs, "--state", "empty")
    assert group in out(listed) and all(line.split()[-1] == "Empty" for line in out(listed).splitlines()[1:]), out(
        listed
    )
    assert cli("groups", "list", "--bootstrap-server", bs, "--state", "sleeping").returncode == 2


def test_console_consumer_start_positions_and_kafka_properties(kafka_cluster, kafka_topic, admin):
    bs = kafka_cluster.bootstrap_servers
    topic = kafka_topic(partitions=1)
    admin.produce(topic, [("k1", "old")])
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    admin.produce(topic, [("k2", "new")])
    base = ["consume", "--bootstrap-server", bs, "--topic", topic, "--timeout-ms", "1500"]
    earliest = cli(*base, "--offset", "earliest", "--property", "print.key=true", "--property", "print.offset=true")
    assert out(earliest).splitlines() == ["Offset:0\tk1\told", "Offset:1\tk2\tnew"], err(earliest)
    latest = cli(*base, "--offset", "latest")
    assert latest.returncode == 0 and out(latest) == ""
    since = cli(*base, "--from-timestamp", str(middle_ms), "--print-partition")
    assert out(since).splitlines() == ["Partition:0\tnew"], err(since)
    group = cli(
        *base,
        "--consumer-property",
        f"group.id=c-{topic}",
        "--consumer-property",
        "auto.offset.reset=earliest",
        "--max-messages",
        "2",
    )
    assert out(group).splitlines() == ["old", "new"], err(group)
    assert admin.committed(f"c-{topic}") == {(topic, 0): 2}
    bad = cli(*base, "--offset", "abc")
    assert bad.returncode == 2 and "--offset abc: expected a number >= 0, earliest or latest" in err(bad)


def test_error_messages_are_words_not_python_reprs(kafka_cluster, kafka_topic, admin):
    """Every error path below printed a repr before (`ConfigResource(type=TOPIC, name='demo')`,
    `NON_EMPTY_GROUP (DeleteGroups(live))`, `--header 'nope'`); now each says it in words."""
    bs = kafka_cluster.bootstrap_servers
    topic = kafka_topic(partitions=1)
    runs = [
        cli("configs", "--describe", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "nosuch"),
        cli(
            "configs",
            "--alter",
            "--bootstrap-server",
            bs,
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
            "--add-config",
            "retention.ms=abc",
        ),
        cli("groups", "delete", "--bootstrap-server", bs, "--group", "never-existed"),
        cli("groups", "delete-offsets", "--bootstrap-server", bs, "--group", "never-existed", "--topic", topic),
        cli("transactions", "describe", "--bootstrap-server", bs, "--transactional-id", "never-existed"),
        cli("produce", "--bootstrap-server", bs, "--topic", topic, "--header", "nope", stdin=b"x\n"),
        cli("produce", "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=maybe", stdin=b"x\n"),
        cli("topics", "create", "--bootstrap-server", bs, "--topic", topic, "--config", "nope"),
        cli("consume", "--bootstrap-server", bs, "--topic", topic, "--from-timestamp", "noon"),
    ]
    for r in runs:
        text = err(r)
        assert r.returncode in (1, 2) and text.strip(), (r.args, text)
        assert "Traceback" not in text and not PYTHON_REPR.search(text), (r.args[3:], text)


def test_console_producer_properties_as_kafka_spells_them(kafka_cluster, kafka_topic, admin):
    bs = kafka_cluster.bootstrap_servers
    topic = kafka_topic(partitions=1)
    r = cli(
        "produce",
        "--bootstrap-server",
        bs,
        "--topic",
        topic,
        "--producer-property",
        "acks=1",
        "--producer-property",
        "enable.idempotence=false",
        "--compression-codec",
        "gzip",
        "--property",
        "parse.headers=true",
        "--property",
        "parse.key=true",
        "--property",
        "null.marker=NULL",
        stdin=b"trace:abc\tk1\tv1\n\tNULL\tv2\n",
    )
    assert r.returncode == 0 and out(r).strip() == "2 records acknowledged", err(r)
    records = admin.records(topic)
    assert [(x.key, x.value) for x in records] == [(b"k1", b"v1"), (None, b"v2")]
    assert [(h.key, h.value) for h in records[0].headers] == [("trace", b"abc")]
    refused = cli(
        "produce",
        "--bootstrap-server",
        bs,
        "--topic",
        topic,
        "--request-required-acks",
        "1",
        "--producer-property",
        "enable.idempotence=true",
        stdin=b"x\n",
    )
    assert refused.returncode == 2 and "enable.idempotence=true needs acks=all" in err(refused)
