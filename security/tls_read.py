"""Reading a TLS stream in fewer passes (a PLAINTEXT connection reads straight from its socket,
`broker/server.py`; a TLS one goes through trio's `SSLStream`, which returns at most one TLS
record, 16 KiB, per `receive_some`, each a pass through its locks and retry loop, although its
transport read takes up to 64 KiB at once)."""

from __future__ import annotations

import ssl

import trio


def drain_tls(stream: trio.SSLStream, data: bytes | bytearray, size: int) -> bytes | bytearray:
    """`data` and the plaintext of the whole TLS records `stream` has already received (up to
    `size` bytes in all), decrypted now: trio's `receive_some` returns one record (16 KiB at most)
    per call, each call a pass through its locks and retry loop, while the transport read that
    filled its buffer took up to 64 KiB. Reads only what OpenSSL holds (no I/O); the next
    `receive_some` reports anything else (more to read, an alert, the end)."""
    ssl_object = stream._ssl_object  # trio's own SSLObject: no public way to drain it
    parts, total = [data], len(data)
    while total < size:
        try:
            more = ssl_object.read(size - total)
        except ssl.SSLError:  # SSLWantReadError: no whole record left; others: receive_some raises them
            break
        if not more:
            break
        parts.append(more)
        total += len(more)
    return data if len(parts) == 1 else b"".join(parts)
