"""The broker's ZooKeeper session: what happens when it is suspended, expires, and comes back
(Kafka's `ZooKeeperClient` session handling with `KafkaZkClient`'s state-change handlers).

Rules this module keeps:
- An expired session is an event, never an error that ends the broker: however often it expires,
  the next session re-registers `/brokers/ids/<id>` (a new broker epoch, the znode's czxid) and the
  controller re-runs its election.
- While the connection is only suspended the broker keeps serving with the metadata it has; on
  expiry the controller resigns at once (`on_expired`), before any new session exists.
- Registration under a new session is retried until it holds: a ZooKeeper error (connection loss,
  the new session expiring too) only makes it try again after `retry_backoff_s`; a registration
  is done when the znode's ephemeral owner is the current session. A znode owned by another
  session (a previous session of ours that ZooKeeper has not expired yet, or another broker with
  the same id) is waited out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from zk.client import SESSION_ERRORS, NodeExistsError, ZkClient

log = logging.getLogger(__name__)


class SessionKeeper:
    """Consumes `zk.state_changes` ("CONNECTED" / "SUSPENDED" / "LOST").

    `path` / `data()`: the ephemeral registration znode and its content;
    `on_expired()`: called on the trio thread when the session is lost;
    `on_registered(czxid)`: called after each re-registration under a new session, with the new
    broker epoch."""

    def __init__(
        self,
        zk: ZkClient,
        path: str,
        data: Callable[[], bytes],
        on_expired: Callable[[], None],
        on_registered: Callable[[int], None],
        retry_backoff_s: float = 0.5,
    ):
        self.zk = zk
        self.path = path
        self.data = data
        self.on_expired = on_expired
        self.on_registered = on_registered
        self.retry_backoff_s = retry_backoff_s
        self.expirations = 0  # sessions lost since start-up (for logs and tests)
        self._registering: trio.CancelScope | None = None

    async def run(self) -> None:
        lost = suspended = False
        async with trio.open_nursery() as nursery:
            async for state in self.zk.state_changes:
                if state == "SUSPENDED":
                    suspended = True
                    log.warning("ZooKeeper connection lost; serving with the last known metadata")
                elif state == "LOST":
                    self.expirations += 1
                    log.warning("ZooKeeper session expired (%d since start-up)", self.expirations)
                    lost = True
                    if self._registering is not None:
                        self._registering.cancel()  # that session is gone; the next one registers
                    self.on_expired()
                elif state == "CONNECTED":
                    if suspended or lost:
                        log.info("ZooKeeper connection re-established%s", " with a new session" if lost else "")
                    suspended = False
                    if lost:
                        lost = False
                        scope = self._registering = trio.CancelScope()
                        nursery.start_soon(self._register_again, scope)

    async def _register_again(self, scope: trio.CancelScope) -> None:
        with scope:
            attempt = 0
            while True:
                attempt += 1
                try:
                    czxid = await self.register_once()
                except SESSION_ERRORS as e:
                    log.warning("re-registration attempt %d failed (%s); retrying", attempt, type(e).__name__)
                else:
                    if czxid is not None:
                        log.info("re-registered %s under a new session (broker epoch %d)", self.path, czxid)
                        self.on_registered(czxid)
                        return
                    if attempt % 20 == 1:
                        log.warning("%s is held by another session; waiting for it to go", self.path)
                await trio.sleep(self.retry_backoff_s)
        if self._registering is scope:
            self._registering = None

    async def register_once(self) -> int | None:
        """Create the ephemeral znode; its czxid (the new broker epoch) when it is ours, None when
        another session holds it. Raises one of `SESSION_ERRORS` on a ZooKeeper failure."""
        try:
            await self.zk.create(self.path, self.data(), ephemeral=True)
        except NodeExistsError:
            pass  # ours already (a create retried after a connection loss), or another session's
        stat = await self.zk.owned(self.path)
        return None if stat is None else stat.czxid
