"""ACLs in ZooKeeper and this broker's cache of them (Kafka's `AclAuthorizer` with its `ZkAclStore`
and `ZkNodeChangeNotificationListener`s).

- Startup: every pattern znode under `/kafka-acl/<Type>/` and `/kafka-acl-extended/prefixed/<Type>/`
  is read into the `AclCache`.
- Changes: a sequential `acl_changes_<seq>` under `/kafka-acl-changes` (literal) or
  `/kafka-acl-extended-changes` (prefixed) names a pattern; every broker re-reads that pattern's
  znode. Notifications older than 15 minutes are deleted, as Kafka does.
- Writes (CreateAcls / DeleteAcls, from any broker): read-modify-write of the pattern znode with its
  zkVersion (retried on a concurrent change), then the notification. An emptied pattern's znode is
  deleted.
"""

from __future__ import annotations

import logging
import time

import trio

from security.acl import (
    CHANGE_PREFIX,
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    LITERAL_ROOT,
    PREFIXED_ROOT,
    RESOURCE_NAMES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
)
from security.authorizer import AclCache
from zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient

log = logging.getLogger(__name__)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ZkAclStore:
    def __init__(self, zk: ZkClient, cache: AclCache):
        self.zk = zk
        self.cache = cache
        self._last_seq = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._wake_send, self._wake_receive = trio.open_memory_channel[None](1)

    # ---- reading -------------------------------------------------------------------------------
    async def _read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        found = await self.zk.get_or_none(pattern.zk_path())
        if found is None:
            return frozenset()
        try:
            return frozenset(decode_acls(found[0]))
        except InvalidAcl as e:
            log.error("ignoring the ACLs of %s: %s", pattern, e)
            return frozenset()

    async def reload(self, pattern: ResourcePattern) -> None:
        self.cache.set(pattern, await self._read(pattern))

    async def load_all(self) -> None:
        for root, pattern_type in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            for resource_type, kind in RESOURCE_NAMES.items():
                try:
                    names = await self.zk.get_children(f"{root}/{kind}")
                except NoNodeError:
                    continue
                for name in names:
                    await self.reload(ResourcePattern(resource_type, name, pattern_type))
        log.info("loaded %d ACL bindings", len(self.cache.bindings()))

    # ---- writing -------------------------------------------------------------------------------
    async def _update(self, pattern: ResourcePattern, change) -> None:
        """Apply `change(entries) -> entries` to a pattern's znode atomically, then announce it."""
        path = pattern.zk_path()
        while True:
            found = await self.zk.get_or_none(path)
            current = frozenset(decode_acls(found[0])) if found is not None else frozenset()
            wanted = frozenset(change(current))
            if wanted == current:
                return
            try:
                if found is None:
                    await self.zk.create(path, encode_acls(sorted(wanted, key=repr)), makepath=True)
                elif wanted:
                    await self.zk.set(path, encode_acls(sorted(wanted, key=repr)), found[1].version)
                else:
                    await self.zk.delete(path, found[1].version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: read again
        changes, data = encode_change(pattern)
        await self.zk.create(f"{changes}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)
        self.cache.set(pattern, wanted)

    async def add(self, bindings: list[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            await self._update(pattern, lambda current, entries=entries: current | entries)

    async def remove(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Delete every binding `flt` matches (in ZooKeeper's current state); returns them."""
        removed = [b for b in self.cache.bindings(flt)]
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in removed:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            await self._update(pattern, lambda current, entries=entries: current - entries)
        return removed

    # ---- change notifications --------------------------------------------------------------------
    def wake(self) -> None:
        """Re-read the change notifications (after a new ZooKeeper session: changes made while
        the session was gone are processed then)."""
        self._wake([])

    def _wake(self, children: list[str]) -> None:
        try:
            self._wake_send.send_nowait(None)
        except trio.WouldBlock:
            pass

    async def process_notifications(self) -> None:
        now_ms = time.time() * 1000
        for changes in (LITERAL_CHANGES, EXTENDED_CHANGES):
            try:
                children = await self.zk.get_children(changes)
            except NoNodeError:
                continue
            numbered = sorted((int(c[len(CHANGE_PREFIX) :]), c) for c in children if c.startswith(CHANGE_PREFIX))
            for seq, child in numbered:
                found = await self.zk.get_or_none(f"{changes}/{child}")
                if found is None:
                    continue
                if seq > self._last_seq[changes]:
                    try:
                        await self.reload(decode_change(changes, found[0]))
                    except InvalidAcl as e:
                        log.warning("ignoring %s/%s: %s", changes, child, e)
                    self._last_seq[changes] = seq
                if found[1].ctime_ms and now_ms - found[1].ctime_ms > CHANGE_EXPIRATION_MS:
                    try:
                        await self.zk.delete(f"{changes}/{child}")
                    except NoNodeError:
                        pass

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        for changes in (LITERAL_CHANGES, EXTENDED_CHANGES):
            await self.zk.ensure_path(changes)
        await self.load_all()
        await self.process_notifications()  # only to learn the newest sequence numbers
        watches = [await self.zk.watch_children(c, self._wake) for c in (LITERAL_CHANGES, EXTENDED_CHANGES)]
        try:
            task_status.started()
            async for _ in self._wake_receive:
                try:
                    await self.process_notifications()
                except Exception:
                    log.exception("processing ACL change notifications failed; retrying on the next change")
        finally:
            for watch in watches:
                watch.stop()
