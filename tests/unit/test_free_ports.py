"""`local_cluster.ports.free_port`: ports chosen before their listener starts lie outside the
kernel's ephemeral range, where outgoing connections take their local ports (the CI failure it
fixes: a CONTROLLER listener chosen early found its port taken by a connection), reserved host-wide
so that no other process's picker hands the same port out before its listener binds."""

from __future__ import annotations

import os
import socket
import time

import pytest

from local_cluster import ports


@pytest.fixture(autouse=True)
def reservations(tmp_path, monkeypatch):
    """These tests' reservations in a directory of their own, not the host's."""
    monkeypatch.setattr(ports, "RESERVATIONS", tmp_path / "reserved")
    return tmp_path / "reserved"


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


def test_a_port_reserved_by_another_process_is_not_handed_out(monkeypatch, reservations):
    base = ports.free_port_range(101)
    monkeypatch.setattr(ports, "LOWEST", base)  # a range of 101 ports, all free, one not reserved
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (base + 101, 60999))
    open_port = base + 50
    os.unlink(reservations / str(open_port))
    ports._handed_out.discard(open_port)
    assert ports.free_port(attempts=2000) == open_port
    assert (reservations / str(open_port)).exists()  # reserved in turn


def test_a_reservation_holds_for_its_time_then_goes_stale(reservations):
    port = 12345
    assert ports.reserve(port)
    assert not ports.reserve(port)  # another picker (any process) is refused
    old = time.time() - ports.RESERVED_S - 1
    os.utime(reservations / str(port), (old, old))
    assert ports.reserve(port)  # a stale reservation is taken over
    assert not ports.reserve(port)


def test_a_range_is_consecutive_free_and_reserved(reservations):
    base = ports.free_port_range(5)
    first, _ = ports.ephemeral_range()
    assert ports.LOWEST <= base and base + 5 <= first
    assert all((reservations / str(p)).exists() for p in range(base, base + 5))
    for p in range(base, base + 5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    assert all(not ports.reserve(p) for p in range(base, base + 5))
