"""Writing to a TLS stream without a pass through trio's `SSLStream.send_all` (a PLAINTEXT
connection writes straight to its socket, `broker/connection_output.py`): the data is encrypted
into trio's own `SSLObject` and the ciphertext written to the non-blocking socket at once, one
`os.write`, no task switch. trio's `send_all` costs a pass through its conflict detector, locks
and retry loop per call, and the broker's writer task a wake-up per response; py-spy put that
path at about a tenth of the SASL_SSL brokers' busy samples.

The order of the ciphertext is what matters. trio's stream keeps it with one lock
(`_inner_send_lock`): whoever pulled ciphertext out of the `SSLObject` holds the lock, or waits
for it, until that ciphertext is written, and bytes held back (`_delayed_outgoing`, which holds
a TLS 1.3 server's session tickets after the handshake) go before any later ones. So:
- `send_now` writes only while nobody holds that lock (no ciphertext of anyone else pending);
  it sends the held-back bytes first, and holds back what the socket did not take;
- `flush` (a task's await) writes what is held back under the lock, as trio's own next send
  would (which also sends it first), so nothing can overtake it.
Everything runs on the trio thread between awaits, so the checks and the write are one step.
"""

from __future__ import annotations

import os
import ssl

import trio

_OK = trio._ssl._State.OK  # trio's stream state: usable (not broken, not closed)


def send_now(stream: trio.SSLStream, data: bytes | bytearray) -> bool | None:
    """Encrypt `data` and write the ciphertext to `stream`'s socket now. True: all of it went;
    False: part went and the rest is held back in the stream (`flush` must run: until then
    nothing else may be written but through trio or `send_now`, which both send it first);
    None: this cannot be done now (handshake not finished, the stream not usable, another
    send in progress, a transport that is not a socket): nothing was written, use
    `stream.send_all`. Raises trio.BrokenResourceError when the socket or TLS fails (the
    stream is then broken, as trio marks it)."""
    transport = stream.transport_stream
    if (
        not data
        or stream._state is not _OK
        or not stream._handshook.done
        or stream._inner_send_lock.locked()
        or not isinstance(transport, trio.SocketStream)
    ):
        return None
    try:
        stream._ssl_object.write(data)
    except ssl.SSLWantReadError:  # not after a TLS 1.3 handshake; nothing was taken
        return None
    except ssl.SSLError as e:
        stream._state = trio._ssl._State.BROKEN
        raise trio.BrokenResourceError(f"TLS write failed: {e}") from e
    out = stream._outgoing.read()
    held = stream._delayed_outgoing
    if held is not None:
        out = held + out
        stream._delayed_outgoing = None
    try:
        sent = os.write(transport.socket.fileno(), out)
    except BlockingIOError:
        sent = 0
    except OSError as e:
        stream._state = trio._ssl._State.BROKEN
        raise trio.BrokenResourceError(f"socket write failed: {e}") from e
    if sent == len(out):
        return True
    stream._delayed_outgoing = out[sent:]
    return False


async def flush(stream: trio.SSLStream) -> None:
    """Write the ciphertext `send_now` held back (nothing when trio's own send already did),
    under the stream's send lock. Raises trio.BrokenResourceError when the socket fails."""
    async with stream._inner_send_lock:
        held = stream._delayed_outgoing
        if held is None:
            return
        stream._delayed_outgoing = None
        try:
            await stream.transport_stream.send_all(held)
        except BaseException:
            stream._state = trio._ssl._State.BROKEN
            raise
