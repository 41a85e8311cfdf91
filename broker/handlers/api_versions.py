"""ApiVersions (key 18) v0-3: the served APIs and versions (KIP-35, KIP-511).

A request at a version above 3 never reaches this handler: the server answers it with a v0
response carrying UNSUPPORTED_VERSION and the same list, so newer clients downgrade.
"""

from collections.abc import Callable

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

API_KEY = ApiKey.API_VERSIONS


def handler_for(advertised: Callable[[], list[dict]]):
    """The ApiVersions handler answering `advertised()` (the handler table's served APIs and
    versions: `broker.handlers.advertised_api_versions`, which this module does not import)."""

    async def handle(ctx, request) -> dict:
        return {"error_code": ErrorCode.NONE, "api_keys": advertised(), "throttle_time_ms": 0}

    return handle
