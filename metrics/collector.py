"""A prometheus_client collector that reads one broker's state at scrape time, under the names the
Prometheus JMX exporter's Kafka rules (lowercased, `kafka_<domain>_<type>_<name>`, meters as
`_total`) give Kafka's MBeans:

| metric | Kafka MBean |
|---|---|
| kafka_server_replicamanager_underreplicatedpartitions | ReplicaManager UnderReplicatedPartitions |
| kafka_server_replicamanager_underminisrpartitioncount | ReplicaManager UnderMinIsrPartitionCount |
| kafka_server_replicamanager_partitioncount, _leadercount | ReplicaManager PartitionCount, LeaderCount |
| kafka_server_replicamanager_isrshrinks_total, _isrexpands_total | IsrShrinksPerSec, IsrExpandsPerSec |
| kafka_controller_kafkacontroller_activecontrollercount | KafkaController ActiveControllerCount |
| kafka_controller_kafkacontroller_offlinepartitionscount | KafkaController OfflinePartitionsCount |
| kafka_controller_controllerstats_leaderelectionrateandtimems_count | ControllerStats LeaderElectionRateAndTimeMs |
| kafka_controller_controllerstats_uncleanleaderelections_total | UncleanLeaderElectionsPerSec |
| kafka_controller_controllereventmanager_eventqueuesize | ControllerEventManager EventQueueSize |
| kafka_network_requestmetrics_requests_total{request,version} | RequestMetrics RequestsPerSec |
| kafka_network_requestmetrics_errors_total{request,error} | RequestMetrics ErrorsPerSec |
| kafka_network_requestmetrics_totaltimems{request} (histogram, ms) | RequestMetrics TotalTimeMs |
| kafka_server_brokertopicmetrics_{bytesin,messagesin,bytesout,replicationbytesout}_total{topic} | BrokerTopicMetrics |
| kafka_log_log_{size,logstartoffset,logendoffset}{topic,partition} | Log Size, LogStartOffset, LogEndOffset |
| kafka_consumergroup_lag{consumergroup,topic,partition} | (kafka_exporter's name) HW - committed offset |
| kafka_server_group_coordinator_metrics_group_count{protocol} | group-coordinator-metrics group-count (KIP-848) |
| kafka_server_group_coordinator_metrics_consumer_group_count{state} | consumer-group-count (KIP-848) |
| kafka_server_group_coordinator_metrics_consumer_group_rebalance_total | consumer-group-rebalance-count (KIP-848) |
| kafka_consumergroup_members{consumergroup} | (kafka_exporter's name) members of a group |
| kafka_consumergroup_group_epoch, _assignment_epoch{consumergroup} | (ours) a consumer group's epochs |
| kafka_consumergroup_assignment_lag{consumergroup} | (ours) target partitions their member does not own yet |
| kafka_server_group_coordinator_metrics_share_group_count{state} | share-group-count (KIP-932) |
| kafka_server_group_coordinator_metrics_share_group_rebalance_total | share-group-rebalance-count (KIP-932) |
| kafka_sharegroup_members, _group_epoch{sharegroup} | (ours) a share group's members and epoch |
| kafka_server_share_group_metrics_share_acknowledgement_total | share-group-metrics share-acknowledgement-count |
| kafka_server_share_group_metrics_record_acknowledgement_total{ack_type} | record-acknowledgement-count |
| kafka_server_share_group_metrics_partition_load_time_ms_{sum,count} | partition-load-time (ms) |
| kafka_sharegroup_start_offset{sharegroup,topic,partition} | (ours) the SPSO, on the partition's leader |
| kafka_sharegroup_records{sharegroup,topic,partition,state} | (ours) in-flight records by state |
| kafka_sharegroup_lag{sharegroup,topic,partition} | (KIP-1226's share lag) HW - SPSO - records done past it |
| kafka_server_controlplane_refused_total{reason} | (ours) refused controller requests, issue 34 |
| kafka_server_{produce,fetch}_byte_rate, _quota, _throttle_time, _throttled_total{user,client_id} | Produce/Fetch quota sensors |
| kafka_server_{request,controllermutation}_rate, ... | Request / ControllerMutation quota sensors |

Only partitions with a replica on this broker are seen; a controller's gauges are 0 on the others.
Group lag is reported by the group's coordinator, for partitions it hosts a replica of.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from metrics.stats import LATENCY_BUCKETS_MS
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode


def request_name(api_key: int) -> str:
    """Kafka's ApiKeys name: PRODUCE -> Produce, LIST_OFFSETS -> ListOffsets."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerCollector:
    """`collect()` yields the metric families of one broker: `server` (a KafkaServer:
    `request_stats`), `replica_manager` (`partitions`, `topic_stats`, `replica_stats`,
    `min_insync_replicas(topic)`), `controller` (`active`, `ctx.partition_states`, `stats`,
    `event_queue_size`) and `group_coordinator` (`manager.groups`), each read by attribute."""

    def __init__(self, server, replica_manager, controller, group_coordinator=None, share_manager=None):
        self.server, self.replica_manager = server, replica_manager
        self.controller, self.group_coordinator = controller, group_coordinator
        self.share_manager = share_manager

    def collect(self):
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._requests()
        yield from self._topics()
        yield from self._logs()
        yield from self._group_lag()
        yield from self._consumer_groups()
        yield from self._share_groups()
        yield from self._share_partitions()

    def _replica_manager(self):
        rm = self.replica_manager
        leaders = [p for p in rm.partitions.values() if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        under_min = sum(1 for p in leaders if len(p.isr) < rm.min_insync_replicas(p.topic))
        for name, value, doc in (
            (
                "underreplicatedpartitions",
                under,
                "Partitions this broker leads whose ISR is smaller than their replicas",
            ),
            ("underminisrpartitioncount", under_min, "Partitions this broker leads with ISR below min.insync.replicas"),
            ("partitioncount", len(rm.partitions), "Partitions with a replica on this broker"),
            ("leadercount", len(leaders), "Partitions this broker leads"),
        ):
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value)
        stats = rm.replica_stats
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks committed by this leader", value=stats.isr_shrinks
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands", "ISR expansions committed by this leader", value=stats.isr_expands
        )

    def _controller(self):
        c = self.controller
        active = bool(c is not None and c.active)
        offline = sum(1 for s in c.ctx.partition_states.values() if s == "Offline") if active else 0
        prefix = "kafka_controller_"
        yield GaugeMetricFamily(
            prefix + "kafkacontroller_activecontrollercount", "1 on the active controller", value=int(active)
        )
        yield GaugeMetricFamily(
            prefix + "kafkacontroller_offlinepartitionscount", "Partitions without a live leader", value=offline
        )
        yield GaugeMetricFamily(
            prefix + "controllereventmanager_eventqueuesize",
            "Controller events waiting",
            value=c.event_queue_size if c is not None else 0,
        )
        stats = c.stats if c is not None else None
        yield GaugeMetricFamily(
            prefix + "controllerstats_leaderelectionrateandtimems_count",
            "Leader elections made by this broker as controller",
            value=stats.leader_elections if stats else 0,
        )
        yield GaugeMetricFamily(
            prefix + "controllerstats_isrchangerateandtimems_count",
            "ISR change notification events processed by this broker as controller",
            value=stats.isr_change_events if stats else 0,
        )
        yield CounterMetricFamily(
            prefix + "controllerstats_uncleanleaderelections",
            "Unclean leader elections made by this broker as controller",
            value=stats.unclean_leader_elections if stats else 0,
        )

    def _requests(self):
        stats = self.server.request_stats
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered", labels=["request", "version"]
        )
        for (api, version), n in sorted(stats.requests.items()):
            requests.add_metric([request_name(api), str(version)], n)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors", "Error codes in responses", labels=["request", "error"]
        )
        for (api, code), n in sorted(stats.errors.items()):
            errors.add_metric([request_name(api), error_name(code)], n)
        yield errors
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems", "Request time in ms, decoded to encoded", labels=["request"]
        )
        for api, h in sorted(stats.total_time.items()):
            cumulative, buckets = 0, []
            for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), h.counts, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            latency.add_metric([request_name(api)], buckets, h.total_ms)
        yield latency
        context = getattr(self.server, "context", None)
        yield from self._quotas(getattr(context, "quotas", None))
        guard = getattr(context, "control_plane", None)
        if guard is not None:
            refused = CounterMetricFamily(
                "kafka_server_controlplane_refused",
                "Controller requests and ControlledShutdowns refused (broker.control_plane)",
                labels=["reason"],
            )
            for reason, n in sorted(guard.refused.items()):
                refused.add_metric([reason], n)
            yield refused

    def _quotas(self, quotas):
        """Kafka's per-(user, client-id) quota sensors (kafka.server:type=Produce|Fetch|Request|
        ControllerMutation,user=,client-id=): the measured rate, the bound, the last throttle time
        and the throttled responses, for the clients that have a quota."""
        if quotas is None:
            return
        for manager in quotas.by_key().values():
            prefix = f"kafka_server_{manager.name.lower()}"
            families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
                "rate": GaugeMetricFamily(
                    f"{prefix}_byte_rate" if manager.name in ("Produce", "Fetch") else f"{prefix}_rate",
                    f"{manager.name} quota: the measured rate over the quota window",
                    labels=["user", "client_id"],
                ),
                "bound": GaugeMetricFamily(
                    f"{prefix}_quota", f"{manager.name} quota: the bound in force", labels=["user", "client_id"]
                ),
                "throttle": GaugeMetricFamily(
                    f"{prefix}_throttle_time",
                    f"{manager.name} quota: the last throttle time (ms)",
                    labels=["user", "client_id"],
                ),
                "throttled": CounterMetricFamily(
                    f"{prefix}_throttled", f"{manager.name} quota: responses throttled", labels=["user", "client_id"]
                ),
            }
            now_ms = self._now_ms()
            for (user, client_id), sensor in sorted(manager.sensors.items()):
                labels = [user, client_id]
                families["rate"].add_metric(labels, sensor.rate.rate(now_ms))
                families["bound"].add_metric(labels, sensor.bound)
                families["throttle"].add_metric(labels, sensor.last_throttle_ms)
                families["throttled"].add_metric(labels, sensor.throttled)
            yield from families.values()

    @staticmethod
    def _now_ms() -> float:
        import trio

        try:
            return trio.current_time() * 1000
        except RuntimeError:  # scraped outside the broker's trio run (tests)
            return 0.0

    def _topics(self):
        stats = self.replica_manager.topic_stats
        for name, values, doc in (
            ("bytesin", stats.bytes_in, "Record bytes appended by producers"),
            ("messagesin", stats.messages_in, "Records appended by producers"),
            ("bytesout", stats.bytes_out, "Record bytes sent to consumers"),
            ("replicationbytesout", stats.replication_bytes_out, "Record bytes sent to followers"),
        ):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            for topic, n in sorted(values.items()):
                family.add_metric([topic], n)
            yield family

    def _logs(self):
        families = {
            "size": GaugeMetricFamily("kafka_log_log_size", "Log size, bytes", labels=["topic", "partition"]),
            "start": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "Log start offset", labels=["topic", "partition"]
            ),
            "end": GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=["topic", "partition"]),
        }
        for (topic, index), p in sorted(self.replica_manager.partitions.items()):
            labels = [topic, str(index)]
            families["size"].add_metric(labels, p.log.size)
            families["start"].add_metric(labels, p.log.log_start_offset)
            families["end"].add_metric(labels, p.log.log_end_offset)
        yield from families.values()

    def _group_lag(self):
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset",
            labels=["consumergroup", "topic", "partition"],
        )
        coordinator = self.group_coordinator
        partitions = self.replica_manager.partitions
        for group_id, group in sorted(coordinator.manager.groups.items() if coordinator else ()):
            for (topic, index), committed in sorted(group.offsets.items()):
                partition = partitions.get((topic, index))
                if partition is not None:
                    lag.add_metric([group_id, topic, str(index)], max(0, partition.high_watermark - committed.offset))
        yield lag

    def _consumer_groups(self):
        """KIP-848's group coordinator metrics, and per group its members and epochs."""
        coordinator = self.group_coordinator
        groups = sorted(coordinator.manager.groups.items()) if coordinator else []
        by_protocol = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_group_count", "Groups by protocol", labels=["protocol"]
        )
        by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_consumer_group_count",
            "Consumer groups (KIP-848) by state",
            labels=["state"],
        )
        rebalances = CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_consumer_group_rebalance",
            "Target assignments computed for consumer groups",
        )
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
        group_epoch = GaugeMetricFamily(
            "kafka_consumergroup_group_epoch", "A consumer group's epoch", labels=["consumergroup"]
        )
        assignment_epoch = GaugeMetricFamily(
            "kafka_consumergroup_assignment_epoch", "The epoch of its target assignment", labels=["consumergroup"]
        )
        assignment_lag = GaugeMetricFamily(
            "kafka_consumergroup_assignment_lag",
            "Partitions of the target assignment their member does not own yet",
            labels=["consumergroup"],
        )
        counts = {"classic": 0, "consumer": 0, "share": 0}
        states = dict.fromkeys(("Empty", "Assigning", "Reconciling", "Stable"), 0)
        for group_id, group in groups:
            counts[group.group_type] += 1
            consumer = group.consumer
            if group.share is not None:
                continue  # _share_groups
            if consumer is None:
                members.add_metric([group_id], len(group.members))
                continue
            states[consumer.state] = states.get(consumer.state, 0) + 1
            members.add_metric([group_id], len(consumer.members))
            group_epoch.add_metric([group_id], consumer.group_epoch)
            assignment_epoch.add_metric([group_id], consumer.assignment_epoch)
            missing = 0
            for member_id, target in consumer.target.items():
                owned = consumer.members[member_id].assigned if member_id in consumer.members else {}
                missing += sum(len(ps - owned.get(t, frozenset())) for t, ps in target.items())
            assignment_lag.add_metric([group_id], missing)
        for protocol, n in counts.items():
            by_protocol.add_metric([protocol], n)
        for state, n in states.items():
            by_state.add_metric([state], n)
        rebalances.add_metric([], getattr(getattr(coordinator, "consumer", None), "consumer_rebalances", 0))
        yield from (by_protocol, by_state, rebalances, members, group_epoch, assignment_epoch, assignment_lag)

    def _share_groups(self):
        """KIP-932's group coordinator metrics, and per share group its members and epoch."""
        coordinator = self.group_coordinator
        groups = sorted(coordinator.manager.groups.items()) if coordinator else []
        by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_count", "Share groups by state", labels=["state"]
        )
        rebalances = CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_rebalance",
            "Target assignments computed for share groups",
        )
        members = GaugeMetricFamily("kafka_sharegroup_members", "Members of the share group", labels=["sharegroup"])
        epoch = GaugeMetricFamily("kafka_sharegroup_group_epoch", "A share group's epoch", labels=["sharegroup"])
        states = dict.fromkeys(("Empty", "Stable"), 0)
        for group_id, holder in groups:
            share = holder.share
            if share is None:
                continue
            states[share.state] = states.get(share.state, 0) + 1
            members.add_metric([group_id], len(share.members))
            epoch.add_metric([group_id], share.group_epoch)
        for state, n in states.items():
            by_state.add_metric([state], n)
        rebalances.add_metric([], getattr(getattr(coordinator, "share", None), "rebalances", 0))
        yield from (by_state, rebalances, members, epoch)

    def _share_partitions(self):
        """The share-partitions this broker leads (KIP-932's share-group-metrics, and per
        share-partition its SPSO, records by state and lag)."""
        manager = self.share_manager
        acks = CounterMetricFamily(
            "kafka_server_share_group_metrics_share_acknowledgement", "Acknowledgement batches applied"
        )
        records = CounterMetricFamily(
            "kafka_server_share_group_metrics_record_acknowledgement",
            "Records acknowledged, by type",
            labels=["ack_type"],
        )
        load = HistogramMetricFamily(
            "kafka_server_share_group_metrics_partition_load_time_ms", "Time to load a share-partition's state (ms)"
        )
        start = GaugeMetricFamily(
            "kafka_sharegroup_start_offset",
            "The share-partition start offset",
            labels=["sharegroup", "topic", "partition"],
        )
        by_state = GaugeMetricFamily(
            "kafka_sharegroup_records",
            "In-flight records of the share-partition by state",
            labels=["sharegroup", "topic", "partition", "state"],
        )
        lag = GaugeMetricFamily(
            "kafka_sharegroup_lag",
            "Records not yet delivered to completion",
            labels=["sharegroup", "topic", "partition"],
        )
        if manager is not None:
            acks.add_metric([], manager.acknowledgements)
            for kind, name in ((1, "Accept"), (2, "Release"), (3, "Reject"), (0, "Gap")):
                records.add_metric([name], manager.records_acknowledged.get(kind, 0))
            load.add_metric([], [("+Inf", manager.partition_loads)], manager.partition_load_ms)
            for view in manager.share_partition_views():
                labels = [view.group_id, view.topic, str(view.partition)]
                start.add_metric(labels, view.start_offset)
                for state, n in view.records.items():
                    by_state.add_metric(labels + [state], n)
                lag.add_metric(labels, view.lag)
        yield from (acks, records, load, start, by_state, lag)
