"""A coordinator's internal-topic partition moved through real states by LeaderAndIsr, as a
controller would move it, so a coordinator's write meets each way an append fails (issue 45):
NOT_ENOUGH_REPLICAS (an ISR below min.insync.replicas), a timeout (a follower in the ISR that
never fetches) and a lost leadership (the partition moves while the append waits)."""

from __future__ import annotations

import trio
import trio.testing
from broker_helpers import leader_and_isr

from protocol.errors import ErrorCode

#: what a coordinator's client is told for each failure
FAILURES = {
    "not-enough-replicas": ErrorCode.COORDINATOR_NOT_AVAILABLE,
    "timeout": ErrorCode.COORDINATOR_NOT_AVAILABLE,
    "lost-leadership": ErrorCode.NOT_COORDINATOR,
}


class CoordinatorPartition:
    """Partition `index` of `topic`, hosted by the replica manager `rm` (broker 1), whose leader
    changes are told to `coordinator` (its on_election / on_resignation)."""

    def __init__(self, rm, coordinator, topic: str, index: int) -> None:
        self.rm, self.coordinator, self.topic, self.index = rm, coordinator, topic, index
        self.epoch = 0

    async def set(self, leader: int, isr: list[int], replicas: list[int]) -> None:
        self.epoch += 1
        body = leader_and_isr({(self.topic, self.index): (leader, isr, replicas)}, leader_epoch=self.epoch)

        def changed(leaders, followers):
            for p in leaders:
                self.coordinator.on_election(p.tp, p.leader_epoch)
            for p in followers:
                self.coordinator.on_resignation(p.tp, p.leader_epoch)

        await self.rm.become_leader_or_follower(body, 7, changed)

    async def heal(self) -> None:
        """Led here alone again (RF 1, the topic's min.insync.replicas back to the broker's), loaded."""
        self.rm.topic_configs.set(self.topic, {})
        await self.set(1, [1], [1])
        while self.coordinator.runtime.error_for(self.index) != ErrorCode.NONE:
            await trio.sleep(0.01)

    async def failing(self, mode: str, write):
        """`await write()` while the partition fails in `mode` (a key of FAILURES); its answer."""
        if mode == "not-enough-replicas":
            self.rm.topic_configs.set(self.topic, {"min.insync.replicas": "2"})
            await self.set(1, [1], [1, 2])
            await trio.sleep(0.1)  # a coordinator that reloads on a new leader epoch does so
            return await write()
        await self.set(1, [1, 2], [1, 2])  # broker 2 is in the ISR and never fetches
        await trio.sleep(0.1)
        if mode == "timeout":
            return await write()
        answer = {}

        async def run():
            answer["value"] = await write()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            assert "value" not in answer  # waiting for broker 2
            await self.set(2, [2, 1], [2, 1])  # the partition moves to broker 2 meanwhile
        return answer["value"]
