"""Requests from the controller to brokers (Kafka `ControllerChannelManager` and
`ControllerBrokerRequestBatch`).

One sender task per broker, each with its own unbounded queue, so a slow or dead broker never
blocks the others. A request is retried (reconnecting with backoff) until it is answered or its
broker is removed. Responses are handed to a callback that must not block (the controller posts
them as events).

A `RequestBatch` collects, during one state change, the LeaderAndIsr partition states per broker,
the UpdateMetadata partition states for every live broker and the StopReplica partitions per
broker, and sends them at the end, each carrying the controller epoch.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from client.connection import Connection, ConnectionClosed
from protocol.api_keys import ApiKey
from protocol.types import ZERO_UUID
from security.config import PLAINTEXT_CLIENT, ClientSecurity, SecurityProtocol
from zk.znodes import BrokerRegistration, LeaderIsr

log = logging.getLogger(__name__)

VERSIONS = {ApiKey.LEADER_AND_ISR: 7, ApiKey.STOP_REPLICA: 4, ApiKey.UPDATE_METADATA: 8}


class BrokerChannels:
    def __init__(self, nursery: trio.Nursery, client_id: str, security: ClientSecurity = PLAINTEXT_CLIENT):
        self._nursery = nursery
        self._client_id = client_id
        self._security = security
        self._queues: dict[int, trio.MemorySendChannel] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._unanswered: dict[int, list[int]] = {}  # broker id -> [requests queued or in flight]
        self._answered = trio.Event()  # set (and renewed) whenever a request is answered

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        if broker_id in self._queues:
            return
        send, receive = trio.open_memory_channel(math.inf)
        self._queues[broker_id] = send
        self._unanswered[broker_id] = unanswered = [0]
        scope = trio.CancelScope()
        self._scopes[broker_id] = scope
        self._nursery.start_soon(self._sender, broker_id, host, port, receive, scope, unanswered)

    def remove_broker(self, broker_id: int) -> None:
        self._queues.pop(broker_id, None)
        self._unanswered.pop(broker_id, None)
        self._wake_drains()  # they no longer wait for it
        scope = self._scopes.pop(broker_id, None)
        if scope is not None:
            scope.cancel()

    def brokers(self) -> list[int]:
        return list(self._queues)

    def send(self, broker_id: int, api_key: int, body: dict, on_response: Callable | None = None) -> None:
        queue = self._queues.get(broker_id)
        if queue is not None:
            try:
                queue.send_nowait((api_key, body, on_response))
                self._unanswered[broker_id][0] += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._queues.pop(broker_id, None)

    async def drain(self, timeout_s: float, except_broker: int | None = None) -> bool:
        """Wait until every request sent so far (to each broker but `except_broker`) is answered,
        at most `timeout_s` seconds: whether they all were. A controller shutting down drains
        first, so the other brokers learn the leaders its controlled shutdown chose before a new
        controller is elected."""
        with trio.move_on_after(timeout_s):
            while any(n[0] for b, n in self._unanswered.items() if b != except_broker):
                await self._answered.wait()
            return True
        return False

    def _wake_drains(self) -> None:
        self._answered.set()
        self._answered = trio.Event()

    def close(self) -> None:
        for broker_id in list(self._queues):
            self.remove_broker(broker_id)

    async def _sender(
        self,
        broker_id: int,
        host: str,
        port: int,
        queue: trio.MemoryReceiveChannel,
        scope: trio.CancelScope,
        unanswered: list[int],
    ) -> None:
        with scope:
            backoff = 0.1
            pending = None
            while True:
                try:
                    async with Connection.open(host, port, client_id=self._client_id, security=self._security) as conn:
                        backoff = 0.1
                        while True:
                            if pending is None:
                                pending = await queue.receive()
                            api_key, body, on_response = pending
                            response = await conn.request(api_key, body, version=VERSIONS[api_key], timeout_s=30)
                            pending = None
                            unanswered[0] -= 1
                            self._wake_drains()
                            if on_response is not None:
                                on_response(broker_id, response)
                except (ConnectionClosed, trio.TooSlowError) as e:
                    log.info("controller channel to broker %d: %s; retrying in %.1f s", broker_id, e, backoff)
                    await trio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)


@dataclass
class RequestBatch:
    """Requests collected during one state change, sent together by `send`."""

    controller_id: int
    leader_and_isr: dict[int, dict[tuple[str, int], dict]] = field(default_factory=dict)
    update_metadata: dict[tuple[str, int], dict] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    stop_replica: dict[int, dict[tuple[str, int], tuple[bool, int]]] = field(default_factory=dict)

    def add_leader_and_isr(
        self, brokers, tp: tuple[str, int], state: LeaderIsr, replicas: list[int], is_new: bool = False
    ) -> None:
        for broker in brokers:
            self.leader_and_isr.setdefault(broker, {})[tp] = {
                "partition_index": tp[1],
                "controller_epoch": state.controller_epoch,
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
                "partition_epoch": state.zk_version,
                "replicas": list(replicas),
                "is_new": is_new,
            }

    def add_update_metadata(
        self,
        brokers,
        tp: tuple[str, int],
        state: LeaderIsr | None,
        replicas: list[int],
        live: set[int],
        deleting: bool = False,
    ) -> None:
        self.update_metadata_brokers.update(brokers)
        if state is None:
            return
        self.update_metadata[tp] = {
            "partition_index": tp[1],
            "controller_epoch": state.controller_epoch,
            "leader": -2 if deleting else state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "zk_version": state.zk_version,
            "replicas": list(replicas),
            "offline_replicas": [r for r in replicas if r not in live],
        }

    def add_stop_replica(self, brokers, tp: tuple[str, int], delete: bool, leader_epoch: int = -1) -> None:
        for broker in brokers:
            self.stop_replica.setdefault(broker, {})[tp] = (delete, leader_epoch)

    def send(
        self,
        channels: BrokerChannels,
        epoch: int,
        live: dict[int, BrokerRegistration],
        broker_epochs: dict[int, int],
        topic_ids: dict,
        on_response: Callable | None = None,
        inter_broker_listener: str | None = None,
    ) -> None:
        """Send everything collected, then clear the batch. LeaderAndIsr goes first (so replicas
        know their role before Metadata points clients at them); its live leaders are given by
        their `inter_broker_listener` endpoints (the followers fetch there)."""
        leaders = []
        for b, r in live.items():
            host, port = r.endpoint_for(inter_broker_listener)
            leaders.append({"broker_id": b, "host_name": host, "port": port})
        for broker, states in self.leader_and_isr.items():
            if broker not in live:
                continue
            channels.send(
                broker,
                ApiKey.LEADER_AND_ISR,
                {
                    "controller_id": self.controller_id,
                    "controller_epoch": epoch,
                    "broker_epoch": broker_epochs.get(broker, -1),
                    "type": 0,
                    "topic_states": _group(states, topic_ids),
                    "live_leaders": leaders,
                },
                on_response,
            )
        if self.update_metadata_brokers:
            live_brokers = [
                {
                    "id": b,
                    "rack": r.rack,
                    "endpoints": [
                        {"port": p, "host": h, "listener": n, "security_protocol": SecurityProtocol[r.protocol_of(n)]}
                        for n, h, p in r.endpoints
                    ],
                }
                for b, r in live.items()
            ]
            for broker in self.update_metadata_brokers:
                if broker in live:
                    channels.send(
                        broker,
                        ApiKey.UPDATE_METADATA,
                        {
                            "controller_id": self.controller_id,
                            "controller_epoch": epoch,
                            "broker_epoch": broker_epochs.get(broker, -1),
                            "topic_states": _group(self.update_metadata, topic_ids),
                            "live_brokers": live_brokers,
                        },
                    )
        for broker, parts in self.stop_replica.items():
            if broker not in live:
                continue
            topics: dict[str, list] = {}
            for (topic, index), (delete, leader_epoch) in parts.items():
                topics.setdefault(topic, []).append(
                    {"partition_index": index, "leader_epoch": leader_epoch, "delete_partition": delete}
                )
            channels.send(
                broker,
                ApiKey.STOP_REPLICA,
                {
                    "controller_id": self.controller_id,
                    "controller_epoch": epoch,
                    "broker_epoch": broker_epochs.get(broker, -1),
                    "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()],
                },
                on_response,
            )
        self.leader_and_isr.clear()
        self.update_metadata.clear()
        self.update_metadata_brokers.clear()
        self.stop_replica.clear()


def _group(states: dict[tuple[str, int], dict], topic_ids: dict) -> list[dict]:
    topics: dict[str, list] = {}
    for (topic, _), state in sorted(states.items()):
        topics.setdefault(topic, []).append(state)
    return [
        {"topic_name": t, "topic_id": topic_ids.get(t, ZERO_UUID), "partition_states": ps} for t, ps in topics.items()
    ]
