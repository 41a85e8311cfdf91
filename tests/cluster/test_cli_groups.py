"""`minikafka consume --group` and `minikafka groups` against a real broker: consume as a group
member and resume from the commit; describe shows offsets, log end and lag; reset-offsets is a dry
run unless --execute and is refused while the group has members; delete and delete-offsets."""

import signal
import subprocess
import sys
import time

import pytest
from group_helpers import GROUP_BROKER, create_topics, produce
from terminal_signals import sigint_as_in_a_terminal
from test_consumer_group_rebalance import Member

pytestmark = pytest.mark.slow


def cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


def test_consume_with_a_group_then_administer_it(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    bs = broker.bootstrap
    create_topics(bs, {"cg": 2})
    produce(bs, "cg", [b"r%d" % i for i in range(10)], partitions=2)
    first = cli(
        "consume", "--bootstrap-server", bs, "--topic", "cg", "--group", "G", "--from-beginning", "--max-messages", "6"
    )
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.split()) == 6
    described = cli("groups", "describe", "--bootstrap-server", bs, "--group", "G")
    assert described.returncode == 0, described.stderr
    lines = [line.split() for line in described.stdout.splitlines() if line.startswith("G ")]
    assert sorted((row[1], int(row[2])) for row in lines) == [("cg", 0), ("cg", 1)]
    assert sum(int(row[3]) for row in lines) == 6 and sum(int(row[5]) for row in lines) == 4
    assert "GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG" in described.stdout
    rest = cli("consume", "--bootstrap-server", bs, "--topic", "cg", "--group", "G", "--timeout-ms", "3000")
    assert sorted(first.stdout.split() + rest.stdout.split()) == sorted(f"r{i}" for i in range(10))
    listed = cli("groups", "list", "--bootstrap-server", bs)
    assert listed.stdout.split()[4:] == ["G", "classic", "consumer", "Empty"]
    dry = cli("groups", "reset-offsets", "--bootstrap-server", bs, "--group", "G", "--topic", "cg", "--to-earliest")
    assert dry.returncode == 0 and "dry run" in dry.stdout
    state = cli("groups", "describe", "--bootstrap-server", bs, "--group", "G")
    assert sum(int(line.split()[3]) for line in state.stdout.splitlines() if line.startswith("G ")) == 10
    done = cli(
        "groups",
        "reset-offsets",
        "--bootstrap-server",
        bs,
        "--group",
        "G",
        "--topic",
        "cg",
        "--shift-by",
        "-2",
        "--execute",
    )
    assert done.returncode == 0, done.stderr
    again = cli("consume", "--bootstrap-server", bs, "--topic", "cg", "--group", "G", "--timeout-ms", "3000")
    assert len(again.stdout.split()) == 4  # two per partition
    # while a member is active: reset refused, delete refused, delete-offsets of its topic refused
    member = Member(bs, group="G", topic="cg")
    try:
        deadline = time.monotonic() + 60
        while member.assigned is None and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = cli(
            "groups",
            "reset-offsets",
            "--bootstrap-server",
            bs,
            "--group",
            "G",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert refused.returncode == 1 and "inactive" in refused.stderr and "Stable" in refused.stderr
        assert cli("groups", "delete", "--bootstrap-server", bs, "--group", "G").returncode == 1
        members = cli("groups", "describe", "--bootstrap-server", bs, "--group", "G", "--members")
        assert "cg(0,1)" in members.stdout
        busy = cli("groups", "delete-offsets", "--bootstrap-server", bs, "--group", "G", "--topic", "cg")
        assert busy.returncode == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in busy.stderr
    finally:
        member.stop()
    assert (
        cli(
            "groups", "delete-offsets", "--bootstrap-server", bs, "--group", "G", "--topic", "cg", "--partition", "0"
        ).returncode
        == 0
    )
    deleted = cli("groups", "delete", "--bootstrap-server", bs, "--group", "G")
    assert deleted.returncode == 0, deleted.stderr
    assert cli("groups", "list", "--bootstrap-server", bs).stdout.split()[4:] == []


def test_bad_group_arguments_exit_2(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    no_group = cli("groups", "describe", "--bootstrap-server", broker.bootstrap)
    assert no_group.returncode == 2 and "needs --group" in no_group.stderr
    no_spec = cli("groups", "reset-offsets", "--bootstrap-server", broker.bootstrap, "--group", "G", "--topic", "x")
    assert no_spec.returncode == 2
    both = cli("consume", "--bootstrap-server", broker.bootstrap, "--topic", "x", "--group", "G", "--partition", "0")
    assert both.returncode == 2


def test_consume_with_the_consumer_group_protocol_and_describe_epochs(start_broker, tmp_path):
    from member_processes import CONSUMER_BROKER

    broker = start_broker(1, **CONSUMER_BROKER)
    bs = broker.bootstrap
    create_topics(bs, {"kc": 4})
    produce(bs, "kc", [b"k%d" % i for i in range(20)], partitions=4)
    command = [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", bs, "--topic", "kc"]
    # idle for up to 120 s: they stay members while the group is described (CI's load once made an
    # 8 s idle timeout end them between two describes), then SIGINT ends them
    command += ["--group", "K", "--group-protocol", "consumer", "--from-beginning", "--timeout-ms", "120000"]
    paths = [tmp_path / f"out{i}" for i in range(2)]
    files = [path.open("w") for path in paths]
    consumers = [
        subprocess.Popen(
            command, stdout=f, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_in_a_terminal
        )  # SIGINT ends them below, as Ctrl-C in a terminal
        for f in files
    ]
    try:
        deadline = time.monotonic() + 60
        while True:
            members = cli("groups", "describe", "--bootstrap-server", bs, "--group", "K", "--members")
            rows = [line.split() for line in members.stdout.splitlines()[1:]]
            if len(rows) == 2 and all(row[4] == "2" for row in rows):
                break
            assert time.monotonic() < deadline, members.stdout + members.stderr
            time.sleep(0.3)
        header = members.stdout.splitlines()[0].split()
        assert header[-2:] == ["MEMBER-EPOCH", "TARGET-ASSIGNMENT"]
        assert all(row[5] == row[7] for row in rows)  # current = target once reconciled
        state = cli("groups", "describe", "--bootstrap-server", bs, "--group", "K", "--state")
        row = state.stdout.splitlines()[1].split()
        assert row[1:3] == ["consumer", "consumer"] and row[4] in ("Stable", "Reconciling")
        listed = cli("groups", "list", "--bootstrap-server", bs)
        assert ["K", "consumer", "consumer"] == listed.stdout.split()[4:7]
        while sum(len(path.read_text().split()) for path in paths) < 20:  # flushed per fetched batch
            assert time.monotonic() < deadline + 60, [path.read_text() for path in paths]
            time.sleep(0.2)
        for c in consumers:
            c.send_signal(signal.SIGINT)
        errors = [c.communicate(timeout=120)[1] for c in consumers]  # leaving the group, under load
    finally:
        for c in consumers:
            c.kill()
        for f in files:
            f.close()
    assert all(c.returncode == 130 for c in consumers), errors
    outs = [path.read_text() for path in paths]
    assert sorted(outs[0].split() + outs[1].split()) == sorted(f"k{i}" for i in range(20))
    bad = cli(
        "consume",
        "--bootstrap-server",
        bs,
        "--topic",
        "kc",
        "--group",
        "K",
        "--group-protocol",
        "consumer",
        "--assignor",
        "range",
    )
    assert bad.returncode == 2 and "classic protocol" in bad.stderr
