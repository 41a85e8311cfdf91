"""Consumer group members in their own processes (tests/helpers/kip848_member.py, confluent-kafka)
for the KIP-848 tests: start them, kill or stop them, and read what they reported; the broker
settings that make consumer groups react within seconds."""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from admin_helpers import wait
from group_helpers import GROUP_BROKER

SESSION_MS = 6000
CONSUMER_BROKER = {
    **GROUP_BROKER,
    "group_consumer_heartbeat_interval_ms": 500,
    "group_consumer_min_heartbeat_interval_ms": 100,
    "group_consumer_session_timeout_ms": SESSION_MS,
    "group_consumer_min_session_timeout_ms": 1000,
}
MEMBER = Path(__file__).resolve().parent / "kip848_member.py"


class Member:
    """A member process and what it reported; `protocol` "consumer" (KIP-848) or "classic"."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], protocol: str = "consumer", **config):
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), json.dumps(conf), *topics],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.assignments: list[set] = [set()]
        self.records: list[tuple] = []
        self.errors: list[str] = []
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assignments.append({tuple(tp) for tp in event["assigned"]})
            elif "record" in event:
                self.records.append(tuple(event["record"]))
            elif "error" in event:
                self.errors.append(event["error"])
            elif "closed" in event:
                self.closed = True

    @property
    def assigned(self) -> set:
        return self.assignments[-1]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        wait(lambda: self.closed, "the member to close", 30)
        self.proc.wait(10)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def all_partitions(topic: str, n: int) -> set:
    return {(topic, p) for p in range(n)}


def shared_exactly_once(group: list[Member], wanted: set) -> bool:
    """Every wanted partition owned by exactly one member, and the members balanced."""
    owned = [tp for m in group for tp in m.assigned]
    counts = [len(m.assigned) for m in group]
    return len(owned) == len(set(owned)) and set(owned) == wanted and max(counts) - min(counts) <= 1
