"""ApiVersions (key 18) v0-3: the served APIs and versions (KIP-35, KIP-511).

A request at a version above 3 never reaches this handler: the server answers it with a v0
response carrying UNSUPPORTED_VERSION and the same list, so newer clients downgrade.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.API_VERSIONS


def handler_for(advertised: Callable[[], list[dict]]):
    """The ApiVersions handler answering `advertised()` (the handler table's served APIs and
    versions: `broker.handlers.advertised_api_versions`, which this module does not import)."""

    async def handle(ctx: BrokerContext, request: Request) -> dict:
        return {"error_code": ErrorCode.NONE, "api_keys": advertised(), "throttle_time_ms": 0}

    return handle
