"""`local_cluster.ports.free_port`: ports chosen before their listener starts lie outside the
kernel's ephemeral range, where outgoing connections take their local ports (the CI failure it
fixes: a CONTROLLER listener chosen early found its port taken by a connection)."""

from __future__ import annotations

import socket

from local_cluster import ports


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
