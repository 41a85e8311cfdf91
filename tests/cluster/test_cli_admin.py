"""The admin CLI commands with Kafka's tools' options on a real 4-broker cluster: `configs`,
`topics alter` / `topics describe`, `delete-records`, `reassign-partitions` and `log-dirs`; bad
arguments exit 2, Kafka errors exit 1 with the error's name."""

import json
import shlex
import subprocess
import sys

from admin_helpers import wait
from group_helpers import create_topics, produce

TIMEOUT = 60


def run_cli(command: str, bootstrap: str, expect: int = 0) -> subprocess.CompletedProcess:
    """`minikafka <first word> --bootstrap-server B <the rest>`; asserts the exit status."""
    first, *rest = shlex.split(command)
    r = subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", first, *(rest[:1] if first == "topics" else [])]
        + ["--bootstrap-server", bootstrap]
        + (rest[1:] if first == "topics" else rest),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == expect, (command, r.stdout, r.stderr)
    return r


def test_admin_commands(start_broker, zk, tmp_path):
    brokers = {i: start_broker(i, log_retention_check_interval_ms=300) for i in (1, 2, 3, 4)}
    bs = brokers[1].bootstrap
    create_topics(bs, {"cli": 2}, rf=2)

    def cli(command: str, expect: int = 0) -> subprocess.CompletedProcess:
        return run_cli(command, bs, expect)

    # configs
    topic = "configs --entity-type topics --entity-name cli"
    out = cli(f"{topic} --alter --add-config retention.ms=86400000,cleanup.policy=[compact,delete]").stdout
    assert out.strip() == "Completed updating config for topic cli."
    out = cli(f"{topic} --describe").stdout
    assert out.splitlines()[0] == "Dynamic configs for topic cli are:"
    assert (
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete,"
        " DEFAULT_CONFIG:log.cleanup.policy=delete}" in out
    )
    assert "retention.ms=86400000" in out and "segment.bytes" not in out
    assert "segment.bytes=1073741824" in cli(f"{topic} --describe --all").stdout
    cli(f"{topic} --alter --delete-config cleanup.policy")
    assert "cleanup.policy" not in cli(f"{topic} --describe").stdout
    default = "configs --entity-type brokers --entity-default"
    out = cli(f"{default} --alter --add-config log.retention.ms=604800001").stdout
    assert out.strip() == "Completed updating default config for brokers in the cluster."
    assert "log.retention.ms=604800001" in cli(f"{default} --describe").stdout
    wait(
        lambda: "log.retention.ms=604800001" in cli("configs --describe --entity-type brokers --entity-name 3").stdout,
        "broker 3 to apply the default",
    )
    assert "INVALID_CONFIG" in cli(f"{topic} --alter --add-config retention.ms=soon", expect=1).stderr
    bad = cli("configs --alter --entity-type brokers --entity-name 1 --add-config broker.id=9", expect=1)
    assert "Cannot update these configs dynamically" in bad.stderr
    cli(topic, expect=2)  # neither --describe nor --alter
    assert "KEY=VALUE" in cli(f"{topic} --alter --add-config retention.ms", expect=2).stderr

    # topics alter and describe
    assert cli("topics alter --topic cli --partitions 3").stdout.strip() == "Topic cli now has 3 partitions."
    out = cli("topics describe --topic cli").stdout
    assert "PartitionCount: 3" in out and "Configs: retention.ms=86400000" in out
    assert "INVALID_PARTITIONS" in cli("topics alter --topic cli --partitions 2", expect=1).stderr

    # delete-records, both forms (each partition's 10 records usually form one batch: offset 4 cuts it)
    produce(bs, "cli", [b"r%d" % i for i in range(30)], partitions=3)
    out = cli("delete-records --topic cli --partition 0 --offset 4").stdout
    assert "partition: cli-0\tlow_watermark: 4" in out
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "cli", "partition": 1, "offset": -1}], "version": 1}))
    assert "partition: cli-1\tlow_watermark: 10" in cli(f"delete-records --offset-json-file {offsets}").stdout
    assert "OFFSET_OUT_OF_RANGE" in cli("delete-records --topic cli --partition 2 --offset 99", expect=1).stderr
    cli("delete-records --topic cli", expect=2)

    # reassign-partitions: generate, execute, verify; new replicas start inside cli-0's first batch
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"topics": [{"topic": "cli"}], "version": 1}))
    out = cli(f"reassign-partitions --generate --topics-to-move-json-file {move} --broker-list 3,4").stdout
    proposed = json.loads(out.split("Proposed partition reassignment configuration\n")[1])
    assert {tuple(sorted(p["replicas"])) for p in proposed["partitions"]} == {(3, 4)}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    out = cli(f"reassign-partitions --execute --reassignment-json-file {plan}").stdout
    assert "Successfully started partition reassignments for cli-0,cli-1,cli-2" in out
    wait(
        lambda: cli(f"reassign-partitions --verify --reassignment-json-file {plan}").stdout.count("is completed.") == 3,
        "the reassignments to complete",
    )
    bad = cli(f"reassign-partitions --cancel --reassignment-json-file {plan}", expect=1)
    assert "NO_REASSIGNMENT_IN_PROGRESS" in bad.stderr
    cli("reassign-partitions --execute", expect=2)

    # log-dirs
    def replicas_by_broker():
        described = json.loads(cli("log-dirs --describe --topic-list cli").stdout.splitlines()[-1])
        return {
            b["broker"]: sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"])
            for b in described["brokers"]
        }

    expected = {1: [], 2: [], 3: ["cli-0", "cli-1", "cli-2"], 4: ["cli-0", "cli-1", "cli-2"]}
    wait(lambda: replicas_by_broker() == expected, "log-dirs to show the replicas on brokers 3 and 4 only")
