"""One connection's way out: its requests' responses, sent in request order (Kafka's rule) as
soon as each is ready and every one before it was sent.

`ResponseQueue` holds the connection's requests in progress (`Slot`s, at most `MAX_PIPELINED`).
Whichever task finishes a request (the connection's reader serving an inline request, a
request's handler task, or the task that completed a delayed produce or fetch: all run in the
broker's one trio thread) calls `finished(slot)`, which writes every ready response at the head
straight to the socket: one `os.writev` of the non-blocking socket, no task switch (waking a
writer task for every response was a noticeable share of a small request's cost; a TLS
stream's response is encrypted and written the same way, `security/tls_write.py`). The socket
is the writer task's (`run`) only while it holds a rest the socket did not take at once (a full
socket buffer; for a TLS stream, ciphertext held back, or a response trio must write);
`finished` then only marks the response ready. A failed write ends that connection, never the
finishing task. The writer closes the connection when a request asks for it (`CLOSE`), when
the reader is done and nothing is left, or when a response stays unread for the idle timeout.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable

import trio

from security import tls_write

log = logging.getLogger(__name__)

#: Requests in progress per connection (started, not yet answered); Kafka allows one.
MAX_PIPELINED = 16
_IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)

#: a request's response that closes the connection (after the responses before it are sent)
CLOSE = object()
#: what `send_now` returns when a TLS stream holds back the rest of a response's ciphertext
TLS_HELD: list = [b""]


class Slot:
    """One request in progress on a connection: `released` once its ordered work is done;
    `response` (a list of buffers, None for no response, or CLOSE) is final once `finished`."""

    __slots__ = ("released", "finished", "response", "on_release")

    def __init__(self) -> None:
        self.released = trio.Event()
        self.finished = False
        self.response = None
        self.on_release: Callable[[], None] | None = None  # called once, at the release

    def release(self) -> None:
        if not self.released.is_set():
            self.released.set()
            if self.on_release is not None:
                self.on_release()


class Backlog:
    """Bytes of a connection's responses computed but not yet written to its socket."""

    __slots__ = ("unsent", "_drained")

    def __init__(self) -> None:
        self.unsent = 0
        self._drained = trio.Event()

    def add(self, n: int) -> None:
        self.unsent += n

    def remove(self, n: int) -> None:
        self.unsent -= n
        self._drained.set()

    async def wait_below(self, limit: int) -> None:
        while self.unsent > limit:
            self._drained = trio.Event()
            await self._drained.wait()


class ResponseQueue:
    """The requests in progress on one connection, answered in order (see the module doc).
    `connection` is the connection's cancel scope: cancelled when the connection must end."""

    def __init__(
        self, stream: trio.abc.Stream, backlog: Backlog, connection: trio.CancelScope, peer: str, idle_timeout_s: float
    ) -> None:
        self._stream = stream
        self.backlog = backlog
        self._connection = connection
        self._peer = peer
        self._idle_timeout_s = idle_timeout_s
        self._slots: collections.deque[Slot] = collections.deque()
        self._space = trio.Event()  # set when a slot leaves (put waits on it when full)
        self._wake = trio.Event()  # the writer has work: an unsent rest, or the end
        self._unsent: list | None = None  # a response the socket did not take whole (the writer's)
        self._unsent_size = 0
        self._input_done = False
        self.ended = False

    async def put(self, slot: Slot) -> None:
        """Queue a request just started (waits while MAX_PIPELINED are in progress)."""
        while len(self._slots) >= MAX_PIPELINED and not self.ended:
            self._space = trio.Event()
            await self._space.wait()
        self._slots.append(slot)

    def finished(self, slot: Slot, response) -> None:
        """`slot`'s response is final (buffers, None or CLOSE): send what is ready in order."""
        slot.response = response
        slot.finished = True
        try:
            self._flush()
        except Exception:  # this runs in whichever task finished the request: never let it fail there
            log.exception("closing %s: sending a response failed", self._peer)
            self._end()

    def input_done(self) -> None:
        """The reader starts no more requests: end once every queued one is answered."""
        self._input_done = True
        self._flush()

    def _flush(self) -> None:
        if self._unsent is not None or self.ended:  # the writer owns the socket until then
            return
        slots = self._slots
        while slots and slots[0].finished:
            response = slots.popleft().response
            self._space.set()
            if response is CLOSE:
                self._end()
                return
            if response is None:
                continue
            size = response_size(response)
            try:
                unsent = send_now(self._stream, response, size)
            except trio.BrokenResourceError as e:
                log.debug("connection %s ended: %s", self._peer, e)
                self._end()
                return
            if unsent:
                self._unsent, self._unsent_size = unsent, size
                self._wake.set()
                return
            self.backlog.remove(size)
        if self._input_done and not slots:
            self._end()

    def _end(self) -> None:
        self.ended = True
        self._space.set()
        self._connection.cancel()

    async def run(self) -> None:
        """The writer task: finish the sends the socket did not take at once; a response not
        read within the idle timeout ends the connection."""
        try:
            while not self.ended:
                await self._wake.wait()
                self._wake = trio.Event()
                unsent = self._unsent
                if unsent is None:  # the end (the loop's test), or a wake-up with nothing to send
                    self._flush()
                    continue
                with trio.move_on_after(self._idle_timeout_s) as sending:
                    await send_parts(self._stream, unsent)
                if sending.cancelled_caught:
                    log.info("closing %s: a response was not read for %.0f s", self._peer, self._idle_timeout_s)
                    break
                self.backlog.remove(self._unsent_size)
                self._unsent = None
                self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as e:
            log.debug("connection %s ended: %s", self._peer, e)
        self._end()


def response_size(parts: list) -> int:
    return sum(len(p) for p in parts)


def send_now(stream: trio.abc.Stream, parts: list, size: int) -> list:
    """Write what the socket takes at once, without a pass through trio's scheduler (a plaintext
    stream: one `os.writev` on its non-blocking socket; a TLS stream: encrypted and written by
    `security.tls_write.send_now`); returns the buffers still unsent ([] when all went, `parts`
    itself for a full socket buffer, the response joined into one buffer for a TLS stream trio
    must write, `TLS_HELD` when a TLS stream holds back ciphertext for `send_parts` to flush);
    `size` is their total length in bytes. A small response nearly always goes whole, so it costs one system call and no task
    switch. An error of the socket raises trio.BrokenResourceError, as trio's own send does."""
    if not isinstance(stream, trio.SocketStream):
        if not isinstance(stream, trio.SSLStream):
            return parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        done = tls_write.send_now(stream, data)
        if done is None:  # trio's send must do it: the joined frame, not joined again
            return [data]
        return [] if done else TLS_HELD
    try:
        sent = os.writev(stream.socket.fileno(), parts[:_IOV_MAX])
    except BlockingIOError:
        return parts
    except OSError as e:
        raise trio.BrokenResourceError(f"socket write failed: {e}") from e
    if sent == size:
        return []
    pending = [memoryview(p).cast("B") for p in parts]
    drop_sent(pending, sent)
    return pending


def drop_sent(pending: list, sent: int) -> None:
    """Remove the first `sent` bytes from `pending` (memoryviews), after a partial write."""
    while sent and pending:
        if sent >= len(pending[0]):
            sent -= len(pending.pop(0))
        else:
            pending[0] = pending[0][sent:]
            sent = 0


async def send_parts(stream: trio.abc.Stream, parts: list) -> None:
    """Send a response given as buffers: one send_all for one buffer, else vectored sends
    (sendmsg) so referenced record batches are not copied into one frame first (TLS streams get
    the joined frame: their records are encrypted anyway)."""
    if parts is TLS_HELD:
        assert isinstance(stream, trio.SSLStream)
        await tls_write.flush(stream)
        return
    if len(parts) == 1:
        await stream.send_all(parts[0])
        return
    if not isinstance(stream, trio.SocketStream):
        await stream.send_all(b"".join(parts))
        return
    pending = [memoryview(p).cast("B") for p in parts]
    while pending:
        drop_sent(pending, await stream.socket.sendmsg(pending[:_IOV_MAX]))
