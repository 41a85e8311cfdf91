"""`broker.connection_output.ResponseQueue` over a real socket pair: responses leave in request
order, a ready response is written by the call that finishes it (no writer task pass), what the
socket does not take is finished by the writer, and CLOSE or the end of input end the connection."""

import socket

import trio
import trio.testing

from broker.connection_output import CLOSE, Backlog, ResponseQueue, Slot


def _pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(a)), b


def _received(peer: socket.socket) -> bytes:
    peer.setblocking(False)
    try:
        return peer.recv(1 << 20)
    except BlockingIOError:
        return b""


async def test_responses_leave_in_request_order_written_by_the_call_that_finishes_them():
    stream, peer = _pair()
    async with trio.open_nursery() as nursery:
        queue = ResponseQueue(stream, Backlog(), nursery.cancel_scope, "peer", 5.0)
        nursery.start_soon(queue.run)
        first, second, third = Slot(), Slot(), Slot()
        for slot in (first, second, third):
            await queue.put(slot)
        queue.finished(second, [b"two"])  # not its turn: held
        assert _received(peer) == b""
        queue.finished(first, [b"one-"])  # sends both, in this very call
        assert _received(peer) == b"one-two"
        queue.finished(third, None)  # acks=0: nothing to send
        queue.input_done()  # nothing left: the connection ends
        await trio.sleep_forever()  # cancelled by the end
    assert queue.ended
    peer.close()


async def test_a_response_the_socket_does_not_take_is_finished_by_the_writer():
    stream, peer = _pair()
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = b"x" * (4 << 20)
    received = bytearray()
    async with trio.open_nursery() as nursery:
        backlog = Backlog()
        queue = ResponseQueue(stream, backlog, nursery.cancel_scope, "peer", 5.0)
        nursery.start_soon(queue.run)
        slot, after = Slot(), Slot()
        await queue.put(slot)
        await queue.put(after)
        backlog.add(len(big) + 5)
        queue.finished(slot, [big])
        queue.finished(after, [b"after"])  # behind the unsent rest: the writer sends it later
        assert backlog.unsent > 0
        peer.setblocking(False)
        while len(received) < len(big) + 5:
            await trio.sleep(0.001)
            try:
                received += peer.recv(1 << 20)
            except BlockingIOError:
                pass
        assert bytes(received) == big + b"after" and backlog.unsent == 0
        nursery.cancel_scope.cancel()
    peer.close()


async def test_close_ends_the_connection_after_the_responses_before_it():
    stream, peer = _pair()
    async with trio.open_nursery() as nursery:
        queue = ResponseQueue(stream, Backlog(), nursery.cancel_scope, "peer", 5.0)
        nursery.start_soon(queue.run)
        before, closing, later = Slot(), Slot(), Slot()
        for slot in (before, closing, later):
            await queue.put(slot)
        queue.finished(closing, CLOSE)
        queue.finished(later, [b"never"])
        queue.finished(before, [b"sent"])
        await trio.sleep_forever()
    assert _received(peer) == b"sent" and queue.ended
    peer.close()
