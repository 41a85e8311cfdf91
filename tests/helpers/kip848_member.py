"""One confluent-kafka group member in its own process, for the consumer group protocol tests:
`python kip848_member.py '<json config>' <topic or ^regex> [...]`. It subscribes, polls, commits
what it consumed (synchronously, after each record), and writes JSON lines to stdout:
`{"assigned": [[topic, partition], ...]}` whenever its assignment changes and `{"record": [topic,
partition, offset, value]}` per record. SIGTERM closes it cleanly (a leave); SIGKILL is a crash."""

import json
import signal
import sys

from confluent_kafka import Consumer, KafkaException


def main() -> None:
    config = json.loads(sys.argv[1])
    topics = sys.argv[2:]
    consumer = Consumer(config)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer.subscribe(topics)
    last = None
    while not stopping:
        msg = consumer.poll(0.2)
        assigned = sorted([p.topic, p.partition] for p in consumer.assignment())
        if assigned != last:
            last = assigned
            print(json.dumps({"assigned": assigned}), flush=True)
        if msg is None:
            continue
        if msg.error():
            print(json.dumps({"error": str(msg.error())}), flush=True)
            continue
        print(json.dumps({"record": [msg.topic(), msg.partition(), msg.offset(), msg.value().decode()]}), flush=True)
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException as e:
            print(json.dumps({"error": f"commit: {e}"}), flush=True)
    consumer.close()
    print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    main()
