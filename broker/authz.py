"""Authorization checks for handlers (Kafka's `AuthHelper` over `AclAuthorizer`): whether the
request's principal, from its host, may perform an operation on a resource. Without an authorizer
(`authorizer.class.name` unset) everything is allowed, as in Kafka.

The operations Kafka checks per API are in the handlers, with the error Kafka answers a denial
with (TOPIC_ / GROUP_ / CLUSTER_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a denied request writes
nothing.
"""

from __future__ import annotations

from typing import Protocol

from protocol.api import Request
from security.acl import AclOperation, ResourceType
from security.authorizer import Authorizer


class Authorizing(Protocol):
    """What the checks read of the broker (its `BrokerContext`): the authorizer, or None when
    `authorizer.class.name` is unset."""

    @property
    def authorizer(self) -> Authorizer | None: ...


CLUSTER_NAME = "kafka-cluster"

Op = AclOperation
Resource = ResourceType


def host_of(request) -> str:
    return request.peer.rsplit(":", 1)[0].strip("[]") if request.peer else ""


def allowed(
    ctx: Authorizing, request: Request, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(request.principal, host_of(request), operation, resource_type, name)


def cluster_allowed(ctx: Authorizing, request: Request, operation: AclOperation) -> bool:
    return allowed(ctx, request, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def any_allowed(ctx: Authorizing, request: Request, operation: AclOperation, resource_type: ResourceType) -> bool:
    """May the principal `operation` some resource of the type (Kafka's authorizeByResourceType)?"""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(request.principal, host_of(request), operation, resource_type)
