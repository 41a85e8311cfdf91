"""`minikafka leader-election --preferred` moves leadership back to preferred replicas (ElectLeaders)."""

import subprocess
import sys

import pytest
import trio
from replication_helpers import create_topic, partition_state, wait_for

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CLI = [sys.executable, "-m", "minikafka_cli.main", "leader-election"]


async def test_preferred_leader_election(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await create_topic(brokers, zk, "e", partitions=3, rf=3)
    for p in range(3):
        await wait_for(lambda p=p: len(partition_state(zk, "e", p)["isr"]) == 3)
    preferred = partition_state(zk, "e", 0)["leader"]  # at creation the first replica leads
    assert await trio.to_thread.run_sync(brokers[preferred].stop) == 0  # controlled shutdown moves it away
    assert partition_state(zk, "e", 0)["leader"] != preferred
    await trio.to_thread.run_sync(brokers[preferred].start)
    for p in range(3):
        await wait_for(lambda p=p: len(partition_state(zk, "e", p)["isr"]) == 3, timeout_s=30)
    bootstrap = next(b.bootstrap for i, b in brokers.items() if i != preferred)
    r = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            CLI + ["--bootstrap-server", bootstrap, "--preferred", "--topic", "e"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    assert r.returncode == 0, r.stderr
    assert "Successfully completed leader election for partition e-0" in r.stdout
    assert partition_state(zk, "e", 0)["leader"] == preferred
    r = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            CLI + ["--bootstrap-server", bootstrap, "--preferred", "--topic", "e", "--partition", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    assert r.stdout.strip() == "Valid replica already elected for partition e-0"
