"""A TCP proxy between one broker and ZooKeeper that can silence the broker's ZooKeeper traffic:
the nemesis "a broker's ZooKeeper session expired" without touching the broker process.

`python -m local_cluster.zk_fault_proxy --target HOST:PORT` listens on 127.0.0.1 (an ephemeral
port), prints `listening on PORT` and forwards every connection to the target. It reads commands,
one per line, on standard input (each is acknowledged with `ok MODE` on standard output):

- `pass`: forward everything (the start mode); connections silenced before are closed, so the
  client reconnects at once;
- `drop`: forward nothing, on open and new connections (bytes are read and discarded, nothing is
  closed): the client sees a silent server, and ZooKeeper expires its session after its timeout;
- `handshake`: on new connections forward only the first ZooKeeper frame each way (ConnectRequest,
  ConnectResponse: a session is established or declared expired), then nothing, as `drop`.

ZooKeeper frames are a 4-byte big-endian length and that many bytes (ZooKeeper's jute framing).
"""

from __future__ import annotations

import argparse
import struct
import sys

import trio

PASS, DROP, HANDSHAKE = "pass", "drop", "handshake"


class FaultProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.mode = PASS
        self._silenced: set[trio.SocketStream] = set()  # client streams of silenced connections

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode == PASS:
            for stream in list(self._silenced):
                self._close_soon(stream)
            self._silenced.clear()

    @staticmethod
    def _close_soon(stream: trio.SocketStream) -> None:
        try:
            stream.socket.close()  # the handler's pending receive then fails and it ends
        except OSError:
            pass

    async def handle(self, client: trio.SocketStream) -> None:
        try:
            server = await trio.open_tcp_stream(*self.target)
        except OSError:
            await client.aclose()
            return
        frames_left = 1 if self.mode == HANDSHAKE else None  # per direction, before silence
        silenced = self.mode == DROP
        if silenced:
            self._silenced.add(client)
        async with client, server, trio.open_nursery() as nursery:
            # per direction: silenced, and the frames still to forward before silence (None: all)
            state = {
                "silenced": {"up": silenced, "down": silenced},
                "frames": {"up": frames_left, "down": frames_left},
            }

            async def pump(src: trio.SocketStream, dst: trio.SocketStream, direction: str) -> None:
                buffer = b""
                try:
                    while True:
                        data = await src.receive_some(65536)
                        if not data:
                            break
                        if self.mode == DROP and not state["silenced"][direction]:
                            state["silenced"] = {"up": True, "down": True}
                            self._silenced.add(client)
                        if state["silenced"][direction]:
                            continue
                        left = state["frames"][direction]
                        if left is None:
                            await dst.send_all(data)
                            continue
                        buffer += data  # handshake mode: forward whole frames while any are left
                        while left > 0 and len(buffer) >= 4:
                            (size,) = struct.unpack(">i", buffer[:4])
                            if len(buffer) < 4 + size:
                                break
                            await dst.send_all(buffer[: 4 + size])
                            buffer, left = buffer[4 + size :], left - 1
                        state["frames"][direction] = left
                        if left == 0:
                            state["silenced"][direction] = True
                            self._silenced.add(client)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(pump, client, server, "up")
            nursery.start_soon(pump, server, client, "down")
        self._silenced.discard(client)

    async def commands(self) -> None:
        stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
        pending = b""
        while True:
            data = await stdin.receive_some(1024)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                mode = line.decode().strip()
                if mode in (PASS, DROP, HANDSHAKE):
                    self.set_mode(mode)
                    print(f"ok {mode}", flush=True)
                elif mode:
                    print(f"error unknown command {mode!r}", flush=True)


async def main(target: str) -> None:
    host, _, port = target.rpartition(":")
    proxy = FaultProxy(host, int(port))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(f"listening on {listeners[0].socket.getsockname()[1]}", flush=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, proxy.handle, listeners)
        await proxy.commands()
        nursery.cancel_scope.cancel()  # standard input closed: the controlling process is gone


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", required=True, help="ZooKeeper's HOST:PORT")
    trio.run(main, parser.parse_args().target)
