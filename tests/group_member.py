"""A confluent-kafka group consumer run as its own process by the group tests:
`python group_member.py BOOTSTRAP GROUP TOPIC [INSTANCE_ID]`. It prints one JSON line per
rebalance event ({"assigned": [[topic, partition], ...]} or {"revoked": [...]}) and {"consumed": n}
every 20 records, commits synchronously after each poll that returned records, and on SIGTERM
closes cleanly (a dynamic member leaves the group)."""

import json
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
        "partition.assignment.strategy": "range",
    }
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def say(kind, partitions):
        print(json.dumps({kind: sorted([p.topic, p.partition] for p in partitions)}), flush=True)

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
