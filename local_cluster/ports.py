"""Ports chosen before the process that listens on them starts (a ZooKeeper, a listener that
must be advertised through a proxy, a compose cluster's published ports).

A port from `bind(("127.0.0.1", 0))` comes from the kernel's ephemeral range
(`/proc/sys/net/ipv4/ip_local_port_range`), the range every other `bind(0)` on the host (each
broker's listeners, in a test run with two pytest processes) and every outgoing connection
take ports from: once the choosing socket is closed, any of them may take it before the
listener binds, which then fails with "Address already in use" (seen in CI: a broker's
CONTROLLER listener, chosen seconds before its broker started). `free_port` picks a
free port below that range instead, where the kernel never assigns one by itself, and never the
same one twice in a process. Only pickers like this one compete for those ports; a listener that
need not be known in advance binds port 0 itself, which no one can race.

Pickers in other processes (pytest workers, each test's ZooKeeper) must not hand out a port
already chosen here and not yet bound: a `minikafka cluster up` binds its brokers' consecutive
ports seconds after choosing them, and a ZooKeeper started meanwhile by another test once took
one (CI: "failed to bind ... Address already in use"). So each pick is also reserved host-wide,
by a Unix socket bound in Linux's abstract namespace to a name made of the port, which another
process cannot bind while this one holds it. Nothing is written anywhere: a reservation ends
when the picker closes it, `RESERVED_S` after the pick, or when its process exits. Elsewhere
than on Linux there is no such namespace and picks are not reserved.
"""

from __future__ import annotations

import random
import socket
import sys
import time
from pathlib import Path

LOWEST = 10_000  # below: well-known and registered services' ports
#: how long (s) a reservation holds: ample time for the chooser's listener to bind
RESERVED_S = 600.0
_handed_out: set[int] = set()
_held: dict[int, tuple[socket.socket, float]] = {}  # port -> (its reservation, monotonic time of the pick)


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


def reserve(port: int) -> bool:
    """Reserve `port` host-wide for `RESERVED_S` seconds, or until this process exits; False when
    a reservation (this process's or another's) holds it. Always True where abstract Unix
    sockets do not exist (not Linux)."""
    now = time.monotonic()
    for held, (sock, since) in list(_held.items()):
        if now - since > RESERVED_S:
            sock.close()
            del _held[held]
    if not sys.platform.startswith("linux"):
        return True
    if port in _held:
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"\0minikafka-port-{port}")
    except OSError:
        sock.close()
        return False
    _held[port] = (sock, now)
    return True


def free_port(attempts: int = 200) -> int:
    """A port free on 127.0.0.1 now, outside the ephemeral range, not handed out before by this
    process and not reserved by another (`reserve`); an ephemeral one (the old way) only if no
    such port is found in `attempts` tries."""
    first, _ = ephemeral_range()
    below = range(LOWEST, first) if first > LOWEST + 100 else range(0)
    for _ in range(attempts if below else 0):
        port = random.choice(below)
        if port not in _handed_out and _bindable(port) and reserve(port):
            _handed_out.add(port)
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _handed_out.add(port)
    return port


def free_port_range(count: int, attempts: int = 50) -> int:
    """The first of `count` consecutive ports, each free and reserved as `free_port` picks one,
    for a cluster whose listeners take base, base + 1, ... (`minikafka cluster up --base-port`).
    RuntimeError when no such range is found in `attempts` tries."""
    first, _ = ephemeral_range()
    for _ in range(attempts):
        base = random.randrange(LOWEST, max(LOWEST + 1, first - count))
        span = range(base, base + count)
        if all(p not in _handed_out and _bindable(p) for p in span) and all(reserve(p) for p in span):
            _handed_out.update(span)
            return base
    raise RuntimeError(f"no {count} consecutive free ports below {first}")
