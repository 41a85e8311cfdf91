"""`local_cluster.ports.free_port`: ports chosen before their listener starts lie outside the
kernel's ephemeral range, where outgoing connections take their local ports (the CI failure it
fixes: a CONTROLLER listener chosen early found its port taken by a connection), reserved host-wide
so that no other process's picker hands the same port out before its listener binds."""

from __future__ import annotations

import socket
import sys

import pytest

from local_cluster import ports

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")


def held_elsewhere(port: int) -> socket.socket:
    """A reservation of `port` as another process's picker holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(f"\0minikafka-port-{port}")
    return sock


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable():
    first, last = ports.ephemeral_range()
    assert 0 < first <= last
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == 50
    assert all(ports.LOWEST <= port < first for port in chosen), chosen
    for port in chosen[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(monkeypatch):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    taken = holder.getsockname()[1]
    try:
        monkeypatch.setattr(ports, "LOWEST", taken)  # a range of one port or the fallback
        monkeypatch.setattr(ports, "ephemeral_range", lambda: (taken + 101, 60999))
        for _ in range(20):
            assert ports.free_port(attempts=5) != taken
    finally:
        holder.close()


def test_an_unreadable_range_falls_back_to_linuxs_default(tmp_path):
    assert ports.ephemeral_range(tmp_path / "missing") == (32768, 60999)
    garbled = tmp_path / "range"
    garbled.write_text("not ports\n")
    assert ports.ephemeral_range(garbled) == (32768, 60999)
    garbled.write_text("20000\t30000\n")
    assert ports.ephemeral_range(garbled) == (20000, 30000)


@linux_only
def test_a_port_reserved_by_another_process_is_not_handed_out(monkeypatch):
    base = ports.free_port_range(101)
    span = range(base, base + 101)
    for p in span:  # this process lets go of the range: another holds all of it but one port
        ports._held.pop(p)[0].close()
    ports._handed_out.difference_update(span)
    monkeypatch.setattr(ports, "LOWEST", base)
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (base + 101, 60999))
    open_port = base + 50
    elsewhere = [held_elsewhere(p) for p in span if p != open_port]
    try:
        assert ports.free_port(attempts=2000) == open_port
        with pytest.raises(OSError):
            held_elsewhere(open_port)  # reserved in turn
    finally:
        for sock in elsewhere:
            sock.close()


@linux_only
def test_a_reservation_holds_for_its_time_then_ends(monkeypatch):
    port = ports.free_port()
    assert not ports.reserve(port)  # held by this process's pick
    with pytest.raises(OSError):
        held_elsewhere(port)  # and by no other process
    monkeypatch.setattr(ports, "RESERVED_S", -1.0)
    assert ports.reserve(port)  # the old reservation ended; this one is new
    monkeypatch.setattr(ports, "RESERVED_S", 600.0)
    assert not ports.reserve(port)


def test_a_range_is_consecutive_free_and_reserved():
    base = ports.free_port_range(5)
    first, _ = ports.ephemeral_range()
    assert ports.LOWEST <= base and base + 5 <= first
    for p in range(base, base + 5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    assert all(not ports.reserve(p) for p in range(base, base + 5)) or not sys.platform.startswith("linux")
