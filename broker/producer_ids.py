"""Producer id allocation (Kafka `ZkProducerIdManager`): blocks of 1000 ids claimed from
/latest_producer_id_block with a conditional update, so ids are unique across the cluster.

Znode JSON (Kafka's): {"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}.
"""

from __future__ import annotations

import json
import logging

import trio

from zk.client import SESSION_ERRORS, BadVersionError, NodeExistsError, ZkClient

log = logging.getLogger(__name__)

PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000
CLAIM_TIMEOUT_S = 5.0  # the longest an InitProducerId waits for ZooKeeper to claim a block


class ProducerIdManager:
    def __init__(self, zk: ZkClient, broker_id: int):
        self.zk = zk
        self.broker_id = broker_id
        self._next = 0
        self._end = -1  # last id of the claimed block
        self._lock = trio.Lock()

    async def generate(self) -> int | None:
        """A producer id no other broker will hand out; None when a new block cannot be claimed
        from ZooKeeper within `CLAIM_TIMEOUT_S` (ZooKeeper unreachable, the session lost): the
        caller answers COORDINATOR_NOT_AVAILABLE, which clients retry."""
        async with self._lock:
            if self._next > self._end:
                claimed = False
                with trio.move_on_after(CLAIM_TIMEOUT_S):
                    try:
                        await self._claim_block()
                        claimed = True
                    except SESSION_ERRORS as e:
                        log.warning("no producer id block claimed: ZooKeeper %s", type(e).__name__)
                if not claimed:
                    return None
            pid = self._next
            self._next += 1
            return pid

    async def _claim_block(self) -> None:
        while True:
            found = await self.zk.get_or_none(PATH)
            start = 0
            if found is not None and found[0]:
                start = int(json.loads(found[0])["block_end"]) + 1
            block = json.dumps(
                {
                    "version": 1,
                    "broker": self.broker_id,
                    "block_start": str(start),
                    "block_end": str(start + BLOCK_SIZE - 1),
                },
                separators=(",", ":"),
            ).encode()
            try:
                if found is None:
                    await self.zk.create(PATH, block)
                else:
                    await self.zk.set(PATH, block, version=found[1].version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed a block first: read again
            self._next, self._end = start, start + BLOCK_SIZE - 1
            return
