"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) outside the SASL exchange.

On a SASL listener the exchange itself happens before any request reaches a handler
(`broker/sasl_phase.py`). What reaches these handlers is a handshake on a listener without SASL
or a second exchange on an authenticated connection: both are ILLEGAL_SASL_STATE, as Kafka's
`KafkaApis` answers them (re-authentication, KIP-368, is not offered: `session_lifetime_ms` 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


async def handshake(ctx: BrokerContext, request: Request):
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


async def authenticate(ctx: BrokerContext, request: Request):
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


HANDLERS: dict[int, Handler] = {ApiKey.SASL_HANDSHAKE: handshake, ApiKey.SASL_AUTHENTICATE: authenticate}
