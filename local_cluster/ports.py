"""Ports chosen before the process that listens on them starts (a ZooKeeper, a listener that
must be advertised through a proxy, a compose cluster's published ports).

A port from `bind(("127.0.0.1", 0))` comes from the kernel's ephemeral range
(`/proc/sys/net/ipv4/ip_local_port_range`), the range every other `bind(0)` on the host (each
broker's listeners, in a test run with two pytest processes) and every outgoing connection
take ports from: once the choosing socket is closed, any of them may take it before the
listener binds, which then fails with "Address already in use" (seen in CI: a broker's
CONTROLLER listener, chosen seconds before its broker started). `free_port` picks a
free port below that range instead, where the kernel never assigns one by itself, and never the
same one twice in a process. Only pickers like this one compete for those ports, and they are
few; a listener that need not be known in advance binds port 0 itself, which no one can race.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000  # below: well-known and registered services' ports
_handed_out: set[int] = set()


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """(first, last) port the kernel assigns to unbound sockets; Linux's default when unreadable."""
    try:
        first, last = (int(word) for word in path.read_text().split())
        return first, last
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:  # no SO_REUSEADDR: a port in TIME_WAIT counts as taken too
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(attempts: int = 200) -> int:
    """A port free on 127.0.0.1 now, outside the ephemeral range and not handed out before by this
    process; an ephemeral one (the old way) only if no such port is found in `attempts` tries."""
    first, _ = ephemeral_range()
    below = range(LOWEST, first) if first > LOWEST + 100 else range(0)
    for _ in range(attempts if below else 0):
        port = random.choice(below)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _handed_out.add(port)
    return port
