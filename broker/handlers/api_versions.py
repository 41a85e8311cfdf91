"""ApiVersions (key 18) v0-3: the served APIs and versions (KIP-35, KIP-511).

A request at a version above 3 never reaches this handler: the server answers it with a v0
response carrying UNSUPPORTED_VERSION and the same list, so newer clients downgrade.
"""

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

API_KEY = ApiKey.API_VERSIONS


async def handle(ctx, request):
    from broker.handlers import advertised_api_versions

    return {"error_code": ErrorCode.NONE, "api_keys": advertised_api_versions(), "throttle_time_ms": 0}
