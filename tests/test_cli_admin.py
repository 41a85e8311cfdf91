"""The admin CLI commands with Kafka's tools' options on a real 4-broker cluster: `configs`,
`topics alter` / `topics describe`, `delete-records`, `reassign-partitions` and `log-dirs`; bad
arguments exit 2, Kafka errors exit 1 with the error's name."""

import json
import subprocess
import sys

from tests.admin_helpers import wait
from tests.group_helpers import create_topics, produce

TIMEOUT = 60


def cli(*args, check=True):
    r = subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", *args], capture_output=True, text=True, timeout=TIMEOUT
    )
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def test_admin_commands(start_broker, zk, tmp_path):
    brokers = {i: start_broker(i, log_retention_check_interval_ms=300) for i in (1, 2, 3, 4)}
    bs = brokers[1].bootstrap
    create_topics(bs, {"cli": 2}, rf=2)

    # configs
    out = cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--add-config",
        "retention.ms=86400000,cleanup.policy=[compact,delete]",
    ).stdout
    assert out.strip() == "Completed updating config for topic cli."
    out = cli(
        "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics", "--entity-name", "cli"
    ).stdout
    assert out.splitlines()[0] == "Dynamic configs for topic cli are:"
    assert (
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}"
        in out
    )
    assert "retention.ms=86400000" in out and "segment.bytes" not in out
    assert (
        "segment.bytes=1073741824"
        in cli(
            "configs",
            "--bootstrap-server",
            bs,
            "--describe",
            "--all",
            "--entity-type",
            "topics",
            "--entity-name",
            "cli",
        ).stdout
    )
    cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--delete-config",
        "cleanup.policy",
    )
    out = cli(
        "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics", "--entity-name", "cli"
    ).stdout
    assert "cleanup.policy" not in out
    out = cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=604800001",
    ).stdout
    assert out.strip() == "Completed updating default config for brokers in the cluster."
    out = cli("configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-default").stdout
    assert "log.retention.ms=604800001" in out
    wait(
        lambda: (
            "log.retention.ms=604800001"
            in cli(
                "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-name", "3"
            ).stdout
        ),
        "broker 3 to apply the default",
    )
    bad = cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--add-config",
        "retention.ms=soon",
        check=False,
    )
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    bad = cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "broker.id=9",
        check=False,
    )
    assert bad.returncode == 1 and "Cannot update these configs dynamically" in bad.stderr
    assert (
        cli(
            "configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "cli", check=False
        ).returncode
        == 2
    )
    bad = cli(
        "configs",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--add-config",
        "retention.ms",
        check=False,
    )
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr

    # topics alter and describe
    assert cli("topics", "alter", "--bootstrap-server", bs, "--topic", "cli", "--partitions", "3").stdout.strip() == (
        "Topic cli now has 3 partitions."
    )
    out = cli("topics", "describe", "--bootstrap-server", bs, "--topic", "cli").stdout
    assert "PartitionCount: 3" in out and "Configs: retention.ms=86400000" in out
    bad = cli("topics", "alter", "--bootstrap-server", bs, "--topic", "cli", "--partitions", "2", check=False)
    assert bad.returncode == 1 and "INVALID_PARTITIONS" in bad.stderr

    # delete-records, both forms
    produce(bs, "cli", [b"r%d" % i for i in range(30)], partitions=3)
    out = cli("delete-records", "--bootstrap-server", bs, "--topic", "cli", "--partition", "0", "--offset", "4").stdout
    assert "partition: cli-0\tlow_watermark: 4" in out
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "cli", "partition": 1, "offset": -1}], "version": 1}))
    out = cli("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(offsets)).stdout
    assert "partition: cli-1\tlow_watermark: 10" in out
    bad = cli(
        "delete-records", "--bootstrap-server", bs, "--topic", "cli", "--partition", "2", "--offset", "99", check=False
    )
    assert bad.returncode == 1 and "OFFSET_OUT_OF_RANGE" in bad.stderr
    assert cli("delete-records", "--bootstrap-server", bs, "--topic", "cli", check=False).returncode == 2

    # reassign-partitions
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"topics": [{"topic": "cli"}], "version": 1}))
    out = cli(
        "reassign-partitions",
        "--bootstrap-server",
        bs,
        "--generate",
        "--topics-to-move-json-file",
        str(move),
        "--broker-list",
        "3,4",
    ).stdout
    proposed = json.loads(out.split("Proposed partition reassignment configuration\n")[1])
    assert {tuple(sorted(p["replicas"])) for p in proposed["partitions"]} == {(3, 4)}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    out = cli(
        "reassign-partitions", "--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan)
    ).stdout
    assert "Successfully started partition reassignments for cli-0,cli-1,cli-2" in out
    wait(
        lambda: (
            cli(
                "reassign-partitions", "--bootstrap-server", bs, "--verify", "--reassignment-json-file", str(plan)
            ).stdout.count("is completed.")
            == 3
        ),
        "the reassignments to complete",
    )
    bad = cli(
        "reassign-partitions", "--bootstrap-server", bs, "--cancel", "--reassignment-json-file", str(plan), check=False
    )
    assert bad.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in bad.stderr
    assert cli("reassign-partitions", "--bootstrap-server", bs, "--execute", check=False).returncode == 2

    # log-dirs
    def replicas_by_broker():
        out = cli("log-dirs", "--bootstrap-server", bs, "--describe", "--topic-list", "cli").stdout
        described = json.loads(out.splitlines()[-1])
        return {
            b["broker"]: sorted(p["partition"] for d in b["logDirs"] for p in d["partitions"])
            for b in described["brokers"]
        }

    expected = {1: [], 2: [], 3: ["cli-0", "cli-1", "cli-2"], 4: ["cli-0", "cli-1", "cli-2"]}
    wait(lambda: replicas_by_broker() == expected, "log-dirs to show the replicas on brokers 3 and 4 only")
