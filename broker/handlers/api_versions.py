"""ApiVersions (key 18) v0-3: the served APIs and versions (KIP-35, KIP-511), and from v3 the
features (KIP-584) this broker supports and the cluster's finalized levels.

A request at a version above 3 never reaches this handler: the server answers it with a v0
response carrying UNSUPPORTED_VERSION and the same list, so newer clients downgrade.

Features: `share.version` (KIP-932) is supported at levels 0-1 and finalized at 1 while
`group.share.enable` is on (as Kafka 4.2's new clusters); off, the share group APIs are not
listed and the feature is not finalized (level 0, which Kafka leaves out of the list).
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
SHARE_VERSION = "share.version"
#: the finalized features' epoch: levels here come from configuration, not a features znode
FEATURES_EPOCH = 0


def share_groups_enabled(ctx: BrokerContext) -> bool:
    return bool(ctx.config["group.share.enable"])


def handler_for(advertised: Callable[[bool], list[dict]]):
    """The ApiVersions handler answering `advertised(share_groups)` (the handler table's served
    APIs and versions: `broker.handlers.advertised_api_versions`, which this module does not
    import)."""

    async def handle(ctx: BrokerContext, request: Request) -> dict:
        enabled = share_groups_enabled(ctx)
        return {
            "error_code": ErrorCode.NONE,
            "api_keys": advertised(enabled),
            "throttle_time_ms": 0,
            "supported_features": [{"name": SHARE_VERSION, "min_version": 0, "max_version": 1}],
            "finalized_features_epoch": FEATURES_EPOCH,
            "finalized_features": (
                [{"name": SHARE_VERSION, "max_version_level": 1, "min_version_level": 1}] if enabled else []
            ),
        }

    return handle
