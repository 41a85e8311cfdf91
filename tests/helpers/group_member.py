"""A confluent-kafka group consumer run as its own process by the group tests:
`python group_member.py BOOTSTRAP GROUP TOPIC [INSTANCE_ID]`. It prints one JSON line per
rebalance event ({"assigned": [[topic, partition], ...]} or {"revoked": [...]}, each followed by
{"owned": [...]}, everything it holds now, incremental or eager) and {"consumed": n}
every 20 records, commits synchronously after each poll that returned records, and on SIGTERM
closes cleanly (a dynamic member leaves the group). $GROUP_MEMBER_ASSIGNOR picks the assignor
(default range)."""

import json
import os
import signal
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    instance = sys.argv[4] if len(sys.argv) > 4 else None
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": os.environ.get("GROUP_MEMBER_ASSIGNOR", "range"),
    }
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    owned: set = set()

    def say(kind, partitions):
        changed = {(p.topic, p.partition) for p in partitions}
        cooperative = config["partition.assignment.strategy"] == "cooperative-sticky"
        if kind == "assigned":
            owned.update(changed) if cooperative else (owned.clear(), owned.update(changed))
        elif cooperative:
            owned.difference_update(changed)
        else:
            owned.clear()
        print(json.dumps({kind: sorted(changed)}), flush=True)
        print(json.dumps({"owned": sorted(owned)}), flush=True)

    consumer.subscribe([topic], on_assign=lambda c, ps: say("assigned", ps), on_revoke=lambda c, ps: say("revoked", ps))
    consumed = 0
    while not stop:
        msgs = consumer.consume(100, 0.2)
        good = [m for m in msgs if not m.error()]
        if good:
            consumed += len(good)
            try:
                consumer.commit(asynchronous=False)
            except Exception as e:  # a commit refused during a rebalance is retried by the next one
                print(json.dumps({"commit_error": str(e)}), flush=True)
            print(json.dumps({"consumed": consumed}), flush=True)
    consumer.close()
    print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    main()
