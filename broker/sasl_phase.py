"""The SASL exchange that opens every connection to a SASL_PLAINTEXT / SASL_SSL listener (Kafka's
`SaslServerAuthenticator`), run before any other request is served.

Order (KIP-43, KIP-152): any number of ApiVersions (key 18) requests, then SaslHandshake (key 17)
naming a mechanism, then the mechanism's tokens: in SaslAuthenticate (key 36) requests after a v1
handshake, or as raw size-prefixed frames after a v0 handshake. Everything else before the
exchange completes closes the connection, as in Kafka. A mechanism the listener does not enable
is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes; failed
credentials are answered SASL_AUTHENTICATION_FAILED with Kafka's message (v1 handshakes; a v0
exchange can only be closed), then the connection closes.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable

from protocol.api import decode_request, encode_response_parts
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, ProtocolError
from security.authenticator import IllegalSaslState, SaslAuthenticationFailed, SaslServerAuthenticator

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">hh")
#: a SASL token larger than this closes the connection (Kafka's `sasl.server.max.receive.size`)
MAX_TOKEN_BYTES = 524288

NextFrame = Callable[[], Awaitable["bytes | bytearray | None"]]
Send = Callable[[list], Awaitable[None]]


async def authenticate(
    next_frame: NextFrame,
    send: Send,
    auth: SaslServerAuthenticator,
    api_versions: Callable[[bytes | bytearray], Awaitable[list | None]],
    peer: str,
) -> str | None:
    """Run the exchange; the authenticated principal, or None when the connection must close.
    `next_frame()` gives the next request frame (None at EOF or timeout), `send(parts)` writes a
    response, `api_versions(frame)` answers an ApiVersions frame as the server does."""
    raw_tokens = False
    while not auth.complete:
        frame = await next_frame()
        if frame is None:
            return None
        if len(frame) > MAX_TOKEN_BYTES:
            log.warning("closing %s: a %d-byte frame during SASL authentication", peer, len(frame))
            return None
        if raw_tokens:  # after a v0 handshake: the frame is the token itself
            try:
                reply = auth.authenticate(bytes(frame))
            except (SaslAuthenticationFailed, IllegalSaslState) as e:
                log.info("closing %s: SASL authentication failed: %s", peer, e)
                return None
            await send([struct.pack(">i", len(reply)), reply])
            continue
        if len(frame) < _HEAD.size:
            log.warning("closing %s: a %d-byte frame during SASL authentication", peer, len(frame))
            return None
        api_key, _ = _HEAD.unpack_from(frame)
        if api_key == ApiKey.API_VERSIONS:
            parts = await api_versions(frame)
            if parts is None:
                return None
            await send(parts)
            continue
        if api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            log.warning("closing %s: unexpected request (API %d) during SASL authentication", peer, api_key)
            return None
        try:
            request = decode_request(frame)
        except ProtocolError as e:
            log.warning("closing %s: %s during SASL authentication", peer, e)
            return None
        if api_key == ApiKey.SASL_HANDSHAKE:
            error = auth.handshake(request.body.mechanism)
            await send(
                encode_response_parts(
                    api_key,
                    request.api_version,
                    request.correlation_id,
                    {"error_code": error, "mechanisms": list(auth.mechanisms)},
                )
            )
            if error != ErrorCode.NONE:
                log.info("closing %s: SASL handshake for %r: %s", peer, request.body.mechanism, error.name)
                return None
            raw_tokens = request.api_version == 0
            continue
        try:
            reply = auth.authenticate(bytes(request.body.auth_bytes))
            error, message = ErrorCode.NONE, None
        except (SaslAuthenticationFailed, IllegalSaslState) as e:
            reply, error, message = b"", e.error_code, str(e)
        await send(
            encode_response_parts(
                api_key,
                request.api_version,
                request.correlation_id,
                {"error_code": error, "error_message": message, "auth_bytes": reply, "session_lifetime_ms": 0},
            )
        )
        if error != ErrorCode.NONE:
            log.info("closing %s: %s: %s", peer, error.name, message)
            return None
    log.debug("%s authenticated as %s (%s)", peer, auth.principal, auth.mechanism)
    return auth.principal
