"""ZooKeeper for trio: the one module that imports kazoo.

kazoo runs its own threads. Every blocking call here goes through `trio.to_thread.run_sync`;
kazoo's callbacks (session state changes, data/children watches) never touch trio objects: they
post into a trio memory channel through the trio token (`run_sync_soon`), as ENVIRONMENT.md
measured. A ZooKeeper that cannot be reached within `connection_timeout_ms` raises
`ZkUnavailable` with the connect string.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import make_acl

from zk.znodes import CONTROLLER, CONTROLLER_EPOCH

log = logging.getLogger(__name__)

__all__ = [
    "ZkClient",
    "ZkUnavailable",
    "Watch",
    "NodeExistsError",
    "NoNodeError",
    "BadVersionError",
    "NotEmptyError",
    "Stat",
    "SESSION_ERRORS",
]

#: What a ZooKeeper call raises when its connection or session goes away under it (kazoo's
#: ConnectionLoss, SessionExpiredError, ...). Never fatal to a broker: the call may be retried
#: once a session is up again (`state_changes` says CONNECTED), as Kafka's ZooKeeperClient does.
SESSION_ERRORS: tuple[type[Exception], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
    ConnectionClosedError,
)


class ZkUnavailable(Exception):
    """ZooKeeper did not answer in time."""


@dataclass(frozen=True)
class Stat:
    """The parts of a znode's stat this project uses: `version` is Kafka's zkVersion, `czxid`
    the creating transaction (Kafka's broker epoch for /brokers/ids/<id>)."""

    version: int
    czxid: int
    ephemeral_owner: int
    ctime_ms: int = 0  # when the znode was created (ms since the epoch)

    @classmethod
    def of(cls, zstat) -> Stat:
        return cls(zstat.version, zstat.czxid, zstat.ephemeralOwner, zstat.ctime)


#: Kafka's sensitive znodes (ZkData.SensitiveRootPaths): not world-readable under zookeeper.set.acl
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")


def sasl_options(login: tuple[str, str] | None) -> dict | None:
    """kazoo's SASL settings for a DIGEST-MD5 (username, password) login to ZooKeeper."""
    if login is None:
        return None
    return {"mechanism": "DIGEST-MD5", "username": login[0], "password": login[1]}


def kafka_acls(path: str, login: tuple[str, str] | None) -> list | None:
    """Kafka's ACLs for a znode it creates with zookeeper.set.acl (ZkData.defaultAcls): all
    rights to the creator's SASL identity, READ to anyone unless the path is sensitive (SCRAM
    credentials, broker configs). None (ZooKeeper's open ACL) without a login."""
    if login is None:
        return None
    acls = [make_acl("sasl", login[0], all=True)]
    if not any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
        acls.append(make_acl("world", "anyone", read=True))
    return acls


class ZkClient:
    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
        sasl_login: tuple[str, str] | None = None,
        set_acl: bool = False,
    ):
        """`sasl_login`: (username, password) for ZooKeeper's SASL DIGEST-MD5; with `set_acl`
        (Kafka's zookeeper.set.acl, which needs a login) every znode created gets `kafka_acls`."""
        self.connect = connect
        self.connection_timeout_ms = connection_timeout_ms
        self._login = sasl_login
        self._acl_login = sasl_login if set_acl else None
        self._kazoo = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2},
            sasl_options=sasl_options(sasl_login),
        )
        self._state_send, self.state_changes = trio.open_memory_channel(64)
        self._token: trio.lowlevel.TrioToken | None = None

    # ---- session -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect; raises ZkUnavailable. Session state changes then arrive on `state_changes`
        as "CONNECTED" / "SUSPENDED" / "LOST"."""
        self._token = trio.lowlevel.current_trio_token()
        hosts, slash, chroot = self.connect.partition("/")
        if slash and chroot.strip("/"):
            await self._ensure_chroot(hosts, "/" + chroot.strip("/"))
        self._kazoo.add_listener(self._on_state)
        try:
            await trio.to_thread.run_sync(self._kazoo.start, self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            await trio.to_thread.run_sync(self._kazoo.close)
            raise ZkUnavailable(
                f"ZooKeeper at {self.connect} did not answer within {self.connection_timeout_ms} ms"
            ) from None

    async def _ensure_chroot(self, hosts: str, chroot: str) -> None:
        """A chroot in the connect string must exist before use; create it as Kafka does."""

        def create() -> None:
            client = KazooClient(
                hosts=hosts, timeout=self._kazoo._session_timeout / 1000, sasl_options=sasl_options(self._login)
            )
            try:
                client.start(self.connection_timeout_ms / 1000)
                client.ensure_path(chroot, acl=kafka_acls(chroot, self._acl_login))
            except KazooTimeoutError:
                raise ZkUnavailable(
                    f"ZooKeeper at {hosts} did not answer within {self.connection_timeout_ms} ms"
                ) from None
            finally:
                client.stop()
                client.close()

        await trio.to_thread.run_sync(create)

    def _on_state(self, state: str) -> None:  # kazoo thread
        name = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "SUSPENDED", KazooState.LOST: "LOST"}.get(
            state, str(state)
        )
        self._post(self._state_send, name)

    def _post(self, channel, item) -> None:  # kazoo thread -> trio
        def deliver():
            try:
                channel.send_nowait(item)
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                log.warning("dropped ZooKeeper event %r: nobody is reading", item)

        if self._token is not None:
            try:
                self._token.run_sync_soon(deliver)
            except trio.RunFinishedError:
                pass

    async def close(self) -> None:
        await trio.to_thread.run_sync(self._kazoo.stop)
        await trio.to_thread.run_sync(self._kazoo.close)

    @property
    def session_id(self) -> int | None:
        sid = self._kazoo.client_id
        return sid[0] if sid else None

    # ---- data ----------------------------------------------------------------------------------
    async def _call(self, fn, *args, **kwargs) -> Any:
        """One blocking kazoo call in a worker thread. Cancellable: kazoo queues calls while the
        connection is down, so a caller with a deadline abandons the call when it passes (the
        call may still take effect later, as a timed-out request may in Kafka)."""
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs), abandon_on_cancel=True)

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False, makepath: bool = False
    ) -> str:
        """Create a znode; raises NodeExistsError / NoNodeError. Returns the created path."""
        return await self._call(
            self._kazoo.create,
            path,
            data,
            acl=kafka_acls(path, self._acl_login),
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=makepath,
        )

    async def ensure_path(self, path: str) -> None:
        await self._call(self._kazoo.ensure_path, path, acl=kafka_acls(path, self._acl_login))

    async def get(self, path: str) -> tuple[bytes, Stat]:
        """(data, stat); raises NoNodeError."""
        data, zstat = await self._call(self._kazoo.get, path)
        return data, Stat.of(zstat)

    async def get_or_none(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            return await self.get(path)
        except NoNodeError:
            return None

    async def owned(self, path: str) -> Stat | None:
        """`path`'s stat when it is an ephemeral znode of this client's current session (what a
        registration or an election won by this session holds), else None."""
        found = await self.get_or_none(path)
        if found is None or found[1].ephemeral_owner != self.session_id:
            return None
        return found[1]

    async def _pipelined(self, start: Callable[[Any], Any], items: list) -> list:
        """Send every request (`start(item)`, a kazoo *_async call) before the first answer is
        awaited, all awaited in one worker thread; per item, in order, its result or the
        exception it failed with (nothing is raised here)."""

        def run():
            pending = [start(item) for item in items]
            out = []
            for result in pending:
                try:
                    out.append(result.get())
                except Exception as e:  # noqa: BLE001 - each item's own outcome, for the caller
                    out.append(e)
            return out

        return await trio.to_thread.run_sync(run) if items else []

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, Stat] | None]:
        """(data, stat) or None (no node) for each path, in order. The reads are pipelined
        (`_pipelined`). Raises the first error other than NoNodeError."""
        outcomes = _raise_first_failure(await self._pipelined(self._kazoo.get_async, paths))
        return [None if isinstance(o, NoNodeError) else (o[0], Stat.of(o[1])) for o in outcomes]

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Conditional update when version >= 0; raises BadVersionError / NoNodeError."""
        return Stat.of(await self._call(self._kazoo.set, path, data, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._call(self._kazoo.delete, path, version, recursive)

    async def delete_many(self, paths: list[str]) -> None:
        """Delete every znode of `paths`, pipelined (`_pipelined`); one already gone is skipped.
        Raises the first other error, once every answer is in."""
        _raise_first_failure(await self._pipelined(self._kazoo.delete_async, paths))

    async def exists(self, path: str) -> Stat | None:
        zstat = await self._call(self._kazoo.exists, path)
        return Stat.of(zstat) if zstat else None

    async def get_children(self, path: str) -> list[str]:
        return await self._call(self._kazoo.get_children, path)

    async def fenced_write_many(self, fence_path: str, fence_version: int, op_lists: list[list[tuple]]) -> list:
        """Like `fenced_write` for many independent transactions, pipelined (all are sent before
        the first answer is awaited). Returns, per transaction, its results or the exception it
        would have raised (nothing is raised here)."""

        def commit(ops: list[tuple]):
            return self._transaction(fence_path, fence_version, ops).commit_async()

        outcomes = await self._pipelined(commit, op_lists)  # connection loss and the like: that transaction failed
        return [o if isinstance(o, Exception) else _multi_results(o) for o in outcomes]

    def _transaction(self, fence_path: str, fence_version: int, ops: list[tuple]):
        tx = self._kazoo.transaction()
        tx.check(fence_path, fence_version)
        for op in ops:
            if op[0] == "create":
                tx.create(op[1], op[2], acl=kafka_acls(op[1], self._acl_login))
            else:
                tx.set_data(op[1], op[2], op[3])
        return tx

    async def fenced_write(self, fence_path: str, fence_version: int, ops: list[tuple]) -> list:
        """Apply `ops` atomically, only while `fence_path` still has zkVersion `fence_version`
        (how a controller fences its writes with /controller_epoch). ops: ("create", path, data) or
        ("set", path, data, version). Returns the per-op results; raises BadVersionError when the
        fence or a conditional update fails, NodeExistsError / NoNodeError likewise."""
        results = await trio.to_thread.run_sync(lambda: self._transaction(fence_path, fence_version, ops).commit())
        outcome = _multi_results(results)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def register_controller(self, data: bytes, epoch: int, epoch_version: int) -> Stat:
        """Create the ephemeral /controller znode with `data` and set /controller_epoch to `epoch`
        in one multi-op, conditionally on /controller_epoch still having zkVersion
        `epoch_version` (Kafka's `KafkaZkClient.registerControllerAndIncrementControllerEpoch`):
        nobody ever sees a /controller whose epoch was not yet raised. Returns /controller_epoch's
        new Stat; raises NodeExistsError (another broker's /controller) or BadVersionError (the
        epoch moved: another broker won meanwhile)."""

        def commit():
            tx = self._kazoo.transaction()
            tx.create(CONTROLLER, data, acl=kafka_acls(CONTROLLER, self._acl_login), ephemeral=True)
            tx.set_data(CONTROLLER_EPOCH, str(epoch).encode(), epoch_version)
            return tx.commit()

        outcome = _multi_results(await trio.to_thread.run_sync(commit), fenced=False)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome[1]

    # ---- watches -------------------------------------------------------------------------------
    async def watch_children(self, path: str, on_change: Callable[[list[str]], None]) -> Watch:
        """Call `on_change(sorted children)` on the trio thread now and after every change of
        `path`'s children (kazoo ChildrenWatch, re-armed across reconnects); `path` is created if
        missing. Returns the watch; after `stop()` nothing more is delivered."""
        watch = Watch()

        def on_children(children):  # kazoo thread
            return self._deliver(watch, on_change, sorted(children))

        await self.ensure_path(path)
        await trio.to_thread.run_sync(lambda: self._kazoo.ChildrenWatch(path, on_children))
        return watch

    async def watch_data(self, path: str, on_change: Callable[[bytes | None], None]) -> Watch:
        """Call `on_change(data or None)` on the trio thread now and after every change, creation
        or deletion of `path` (kazoo DataWatch). Returns the watch; after `stop()` nothing more is
        delivered."""
        watch = Watch()

        def on_data(data, zstat, event=None):  # kazoo thread (first call: the constructing thread)
            return self._deliver(watch, on_change, data)

        await trio.to_thread.run_sync(lambda: self._kazoo.DataWatch(path, on_data))
        return watch

    def _deliver(self, watch: Watch, on_change: Callable[[Any], None], value: Any) -> bool:
        """From a kazoo thread: run `on_change(value)` on the trio thread unless the watch was
        stopped. Returns False, which makes kazoo drop the watch, once it is stopped."""
        if not watch.active or self._token is None:
            return False

        def run() -> None:
            if watch.active:
                on_change(value)

        try:
            self._token.run_sync_soon(run)
        except trio.RunFinishedError:
            return False
        return True


class Watch:
    """A data or children watch that can be stopped (`ZkClient.watch_data` / `watch_children`)."""

    def __init__(self) -> None:
        self.active = True

    def stop(self) -> None:
        self.active = False


def _raise_first_failure(outcomes: list) -> list:
    """`outcomes` of `ZkClient._pipelined` when none failed other than with NoNodeError (a znode
    not there); else the first such failure is raised."""
    failure = next((o for o in outcomes if isinstance(o, Exception) and not isinstance(o, NoNodeError)), None)
    if failure is not None:
        raise failure
    return outcomes


def _multi_results(results: list, fenced: bool = True) -> list | Exception:
    """A committed multi-op's per-op results (after the fence check, when `fenced`) as Stats /
    paths, or the exception for a failed one: kazoo returns exception objects instead of raising;
    the real cause is the one that is not RolledBackError (a failed fence check is BadVersionError)."""
    errors = [r for r in results if isinstance(r, Exception)]
    real = [e for e in errors if type(e).__name__ != "RolledBackError"]
    if real:
        return real[0]
    if errors:
        return BadVersionError()
    return [Stat.of(r) if hasattr(r, "version") else r for r in results[1 if fenced else 0 :]]
