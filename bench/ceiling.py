"""The ceiling every `make bench` result is divided by: the least a Python broker must do.

Server (`python -m bench.ceiling serve --port P --file F`): a trio TCP server that reads
length-prefixed frames (int32 size + body), appends each body to one file with `os.write`, and
answers each with a 4-byte ack. No parsing, no validation, no replication.

Client (`measure(port, ...)`): one connection, 16 KiB frames, 8 frames in flight; returns MB/s
of frame bodies acknowledged. The server runs in its own process, like a broker.

`disk_write_mb_s(directory)`: the disk's sustained write speed (MB/s) under the page cache, which a
long run reaches once the kernel's dirty-page limits make writers wait for writeback (every replica
of a local cluster writes to this one disk).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import struct
import subprocess
import sys
import time

import trio

_SIZE = struct.Struct(">i")
_ACK = b"\x00\x00\x00\x01"


async def _serve_connection(stream: trio.SocketStream, fd: int) -> None:
    buf = bytearray()
    async with stream:
        while True:
            data = await stream.receive_some(262144)
            if not data:
                return
            buf += data
            acks, pos = 0, 0
            while len(buf) - pos >= 4:
                size = _SIZE.unpack_from(buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                os.write(fd, memoryview(buf)[pos + 4 : pos + 4 + size])
                pos += 4 + size
                acks += 1
            del buf[:pos]
            if acks:
                await stream.send_all(_ACK * acks)


async def serve(port: int, path: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        print(f"ceiling listening on {listeners[0].socket.getsockname()[1]}", flush=True)
        await trio.serve_listeners(lambda s: _serve_connection(s, fd), listeners)
    finally:
        os.close(fd)


def disk_write_mb_s(directory: str, mib: int = 2048) -> float:
    """Write `mib` MiB of 1 MiB blocks to a new file in `directory` and fsync it; MB/s (MiB/s)
    over the whole, fsync included. The file is removed."""
    path = os.path.join(directory, "disk-ceiling.tmp")
    block = b"\x5a" * (1 << 20)
    os.sync()  # earlier writers' dirty pages are not this measurement's
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(mib):
            os.write(fd, block)
        os.fsync(fd)
        return mib / (time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)


def measure(port: int, *, seconds: float = 3.0, frame_bytes: int = 16384, in_flight: int = 8) -> float:
    """MB/s (MiB, as Kafka's perf tools) of frame bodies acknowledged by the ceiling server."""
    frame = _SIZE.pack(frame_bytes) + os.urandom(frame_bytes)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(in_flight):
            s.sendall(frame)
        acked, pending = 0, b""
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            pending += s.recv(4096)
            n, pending = len(pending) // 4, pending[len(pending) // 4 * 4 :]
            acked += n
            for _ in range(n):
                s.sendall(frame)
        elapsed = time.perf_counter() - start
    return acked * frame_bytes / 1048576 / elapsed


class CeilingServer:
    """The server in a child process: `with CeilingServer(directory) as c: measure(c.port)`."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, "ceiling.log")
        self.process: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> CeilingServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.ceiling", "serve", "--file", self.path], stdout=subprocess.PIPE, text=True
        )
        line = self.process.stdout.readline()
        if not line.startswith("ceiling listening on "):
            self.process.kill()
            raise RuntimeError(f"ceiling server did not start: {line!r}")
        self.port = int(line.split()[-1])
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait()
        # its file is gigabytes of dirty pages: removed and written back now, not during the
        # measurement that follows (the first end-to-end run saw p99 39 ms instead of 8 from it)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.sync()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="the ceiling server (see module doc)")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--file", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    if args.command == "serve":
        trio.run(serve, args.port, args.file)
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d, CeilingServer(d) as c:
            print(f"ceiling: {measure(c.port, seconds=args.seconds):.1f} MB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
