"""Who may act as the controller towards this broker (issue 34, "a trusted control plane").

Kafka's ZooKeeper-mode brokers obey LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6)
from whoever sends a high enough controller epoch, and the controller obeys ControlledShutdown (7)
for whatever broker id it names. Besides the version floor (tools/gen_schemas.py SERVED:
only versions carrying a broker epoch, KIP-380, are served) and CLUSTER_ACTION on the cluster when
an authorizer is configured, this module adds:

- listener: the three controller requests are served only on `control.plane.listener.name` when
  set, else on the inter-broker listener; ControlledShutdown on either of those. Elsewhere:
  CLUSTER_AUTHORIZATION_FAILED, nothing changed.
- controller epoch: a request carrying a controller epoch above the one this broker holds is
  believed only after ZooKeeper agrees: `/controller_epoch` holds that epoch and `/controller`
  names the request's controller id (read, not watched: one read per new epoch). Otherwise
  STALE_CONTROLLER_EPOCH, nothing changed (the real controller's later requests are still obeyed).

Every refusal is counted per reason (`refused`, exported as a Prometheus counter) and logged once
per (peer host, reason).
"""

from __future__ import annotations

import logging
from collections import Counter

import trio

from broker.authz import Op, cluster_allowed
from protocol.api import Request
from protocol.api_keys import ApiKey
from zk import znodes
from zk.client import SESSION_ERRORS, ZkClient

log = logging.getLogger(__name__)

#: how long a broker keeps trying to read ZooKeeper's view of a new controller epoch (s)
EPOCH_CHECK_BUDGET_S = 5.0

LISTENER = "listener"
UNAUTHORIZED = "unauthorized"
EPOCH = "controller epoch not in ZooKeeper"


class ControlPlaneGuard:
    """Refusal bookkeeping and the ZooKeeper check of a new controller epoch."""

    def __init__(self) -> None:
        self.refused: Counter[str] = Counter()  # reason -> requests refused
        self._logged: set[tuple[str, str]] = set()

    def refuse(self, request: Request, reason: str, detail: str = "") -> None:
        """Count one refusal; the first per (peer host, reason) is logged at WARNING."""
        self.refused[reason] += 1
        host = request.peer.rsplit(":", 1)[0]
        if (host, reason) not in self._logged:
            self._logged.add((host, reason))
            log.warning(
                "refused %s v%d from %s on %s: %s%s (further refusals from this host are only counted)",
                ApiKey(request.api_key).name,
                request.api_version,
                request.peer,
                request.listener,
                reason,
                f" ({detail})" if detail else "",
            )

    def off_the_control_plane(self, ctx, request: Request) -> bool:
        """True (counted, logged) when `request` arrived on a listener controller traffic does not
        use, or its principal lacks CLUSTER_ACTION on the cluster."""
        control_plane = ctx.config.control_plane_listener_name
        allowed = {control_plane} if control_plane else {ctx.config.inter_broker_listener.name}
        if request.api_key == ApiKey.CONTROLLED_SHUTDOWN:  # sent broker to controller, inter-broker
            allowed.add(ctx.config.inter_broker_listener.name)
        if request.listener and request.listener not in allowed:
            self.refuse(request, LISTENER, f"served on {', '.join(sorted(allowed))}")
            return True
        if not cluster_allowed(ctx, request, Op.CLUSTER_ACTION):
            self.refuse(request, UNAUTHORIZED)
            return True
        return False

    async def controller_epoch_believed(self, zk: ZkClient | None, held: int, request: Request) -> bool:
        """Whether `request`'s controller epoch may be acted on: not above `held` (the replica
        manager fences older ones itself), or confirmed by ZooKeeper. False is counted and logged."""
        body = request.body
        if zk is None or body.controller_epoch <= held:
            return True
        found = await _controller_in_zookeeper(zk)
        if found == (body.controller_epoch, body.controller_id):
            return True
        self.refuse(
            request,
            EPOCH,
            f"request: epoch {body.controller_epoch} controller {body.controller_id}; ZooKeeper: {found}",
        )
        return False


async def _controller_in_zookeeper(zk: ZkClient) -> tuple[int, int] | None:
    """(epoch in /controller_epoch, id in /controller), None when either cannot be read within
    EPOCH_CHECK_BUDGET_S."""
    with trio.move_on_after(EPOCH_CHECK_BUDGET_S):
        while True:
            try:
                epoch = await zk.get_or_none(znodes.CONTROLLER_EPOCH)
                controller = await zk.get_or_none(znodes.CONTROLLER)
                if epoch is None or controller is None:
                    return None
                return int(epoch[0]), znodes.controller_id_of(controller[0])
            except SESSION_ERRORS:
                await trio.sleep(0.1)
            except ValueError:
                return None
    return None
