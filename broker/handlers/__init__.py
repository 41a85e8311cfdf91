"""Request handlers, one module per API family, registered in `HANDLERS` (api key -> handler).

A handler is `async def handle(ctx: BrokerContext, request: Request) -> dict | None`: it gets a
decoded request and returns a response body (a dict with Kafka's field names) or None when no
response is sent (Produce with acks=0). Handlers never touch bytes or sockets. An API may also
have an inline handler (`INLINE_HANDLERS`): a plain function `(ctx, request, respond)` that
calls `respond(body)` once, now or later, which the server runs without a task of its own. The same table
decides what ApiVersions advertises: an API is advertised only if a handler serves it.
"""

from __future__ import annotations

from broker.handlers import (
    acls,
    admin,
    api_versions,
    client_quotas,
    configs,
    consumer_group,
    controller_requests,
    delete_records,
    describe_log_dirs,
    fetch,
    find_coordinator,
    group_admin,
    group_membership,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    offsets,
    produce,
    sasl,
    scram_credentials,
    share_group,
    share_group_offsets,
    share_state,
    telemetry,
    transaction_admin,
    transactions,
    write_txn_markers,
)
from broker.server import Handler, InlineHandler
from protocol.api import SCHEMAS

_ADVERTISED: dict[bool, list[dict]] = {}


def _advertised(share_groups: bool) -> list[dict]:
    """ApiVersions' list, with or without the share group APIs (built once each)."""
    if share_groups not in _ADVERTISED:
        _ADVERTISED[share_groups] = advertised_api_versions(served_handlers(share_groups=share_groups))
    return _ADVERTISED[share_groups]


HANDLERS: dict[int, Handler] = {
    api_versions.API_KEY: api_versions.handler_for(lambda share: _advertised(share)),
    metadata.API_KEY: metadata.handle,
    produce.API_KEY: produce.handle,
    fetch.API_KEY: fetch.handle,
    list_offsets.API_KEY: list_offsets.handle,
    offset_for_leader_epoch.API_KEY: offset_for_leader_epoch.handle,
    init_producer_id.API_KEY: init_producer_id.handle,
    find_coordinator.API_KEY: find_coordinator.handle,
    **group_membership.HANDLERS,
    **offsets.HANDLERS,
    **group_admin.HANDLERS,
    **consumer_group.HANDLERS,
    **controller_requests.HANDLERS,
    **admin.HANDLERS,
    **configs.HANDLERS,
    **delete_records.HANDLERS,
    **describe_log_dirs.HANDLERS,
    **transactions.HANDLERS,
    **transaction_admin.HANDLERS,
    write_txn_markers.API_KEY: write_txn_markers.handle,
    **sasl.HANDLERS,
    **scram_credentials.HANDLERS,
    **acls.HANDLERS,
    **client_quotas.HANDLERS,
    **share_group.HANDLERS,
    **share_group_offsets.HANDLERS,
    **share_state.HANDLERS,
    **telemetry.HANDLERS,
}


#: APIs served by a synchronous handler in the connection's reader task (broker/server.py)
INLINE_HANDLERS: dict[int, InlineHandler] = {**produce.INLINE, **fetch.INLINE}


#: the APIs of KIP-932's share groups, served only with `group.share.enable`
SHARE_GROUP_APIS = frozenset(
    {
        *share_group.HANDLERS,
        *share_group_offsets.HANDLERS,
        *share_state.HANDLERS,
    }
)


def served_handlers(*, share_groups: bool = True) -> dict[int, Handler]:
    """The handler table of a broker (without the share group APIs when they are off)."""
    return dict(HANDLERS) if share_groups else {k: h for k, h in HANDLERS.items() if k not in SHARE_GROUP_APIS}


def advertised_api_versions(handlers: dict[int, Handler] | None = None) -> list[dict]:
    """The `api_keys` of an ApiVersions response: every handled API with its served versions."""
    return [
        {"api_key": key, "min_version": SCHEMAS[key].min_version, "max_version": SCHEMAS[key].max_version}
        for key in sorted(HANDLERS if handlers is None else handlers)
    ]
