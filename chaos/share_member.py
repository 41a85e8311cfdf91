"""One member of the share group chaos scenario (`chaos/share_groups.py`), a process of its own so
the nemesis can kill -9 it: a confluent-kafka `ShareConsumer` in explicit acknowledgement mode
that writes what happens to it as JSON lines (the checker's history, `chaos/share_checker.py`):
every delivery with its delivery count, every acknowledgement when it is made (`acking`: a
member killed before the answer never learns it), and the broker's answer to it (the
acknowledgement commit callback) with when it was sent. Times are `time.monotonic()`, one clock
for every process of the machine.

    python -m chaos.share_member BOOTSTRAP GROUP TOPIC NAME OUT SEED [--seconds S] [--idle S]
        [--release P] [--reject P]

It accepts each record, or releases (probability P) or rejects it; it stops after `--seconds`, or
after `--idle` seconds without a record, closing the consumer.
"""

from __future__ import annotations

import argparse
import json
import random
import time


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "group", "topic", "name", "out"):
        parser.add_argument(name)
    parser.add_argument("seed", type=int)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--idle", type=float, default=None)
    parser.add_argument("--release", type=float, default=0.0)
    parser.add_argument("--reject", type=float, default=0.0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    out = open(args.out, "a", buffering=1)  # noqa: SIM115 - a line per event, until the process ends

    def emit(**event) -> None:
        event["t"] = time.monotonic()
        out.write(json.dumps(event) + "\n")

    pending: dict[tuple[int, int], tuple[str, str, float]] = {}  # (partition, offset) -> value, kind, sent

    def on_commit(offsets, error) -> None:
        for tp, acked in offsets.items():
            for offset in acked:
                found = pending.pop((tp.partition, offset), None)
                if found is not None:
                    value, kind, sent = found
                    emit(
                        type="acked",
                        member=args.name,
                        value=value,
                        kind=kind,
                        ok=error is None,
                        sent=sent,
                        error=str(error) if error else None,
                        code=_code(error),
                    )

    consumer = ShareConsumer(
        {"bootstrap.servers": args.bootstrap, "group.id": args.group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.set_acknowledgement_commit_callback(on_commit)
    consumer.subscribe([args.topic])
    kinds = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}
    deadline = time.monotonic() + args.seconds
    last_record = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if args.idle is not None and time.monotonic() - last_record > args.idle:
                break
            try:
                messages = [m for m in consumer.poll(0.5) if m.error() is None]
            except KafkaException:
                continue
            for m in messages:
                value = m.value().decode()
                emit(type="delivered", member=args.name, value=value, count=m.delivery_count())
                draw = rng.random()
                kind = "reject" if draw < args.reject else "release" if draw < args.reject + args.release else "accept"
                consumer.acknowledge(m, kinds[kind])
                emit(type="acking", member=args.name, value=value, kind=kind)  # its answer may never come
                pending[(m.partition(), m.offset())] = (value, kind, time.monotonic())
            if messages:
                last_record = time.monotonic()
                try:
                    consumer.commit_sync(10)
                except KafkaException:
                    pass  # the callback reports the failure (or the records come back)
    finally:
        consumer.close()
        out.close()
    return 0


def _code(error) -> int | None:
    """The Kafka error code of a failed acknowledgement (librdkafka's local errors, such as a
    broken connection, are negative), None on success."""
    if error is None:
        return None
    inner = error.args[0] if getattr(error, "args", None) else None
    return inner.code() if hasattr(inner, "code") else -1


if __name__ == "__main__":
    raise SystemExit(main())
