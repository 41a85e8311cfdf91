"""A share group's metrics (KIP-932's names, as the Prometheus JMX exporter spells them) scraped
from a live broker while confluent-kafka's `ShareConsumer` reads with explicit acknowledgements:
the group count and states, records acknowledged by type, the SPSO, in-flight records by state
and the lag of the share-partition; and the web console's view of the same group, rendered in
headless Chromium (screenshot in build/screenshots/console/share-group.png)."""

import re
import time
from pathlib import Path

import pytest
import trio
from chromium import chromium, rendered_dom, screenshot
from confluent_kafka import AcknowledgeType
from metrics_helpers import scrape, value
from share_helpers import BROKER, consumer, produce, set_group_configs, share_groups_cli, share_lags, topic

pytestmark = pytest.mark.slow


def test_share_group_metrics_follow_the_acknowledgements(start_broker):
    broker = start_broker(1, **(BROKER | {"metrics_port": 0}))
    name = topic(broker, partitions=1)
    produce(broker, name, 10, partitions=1)
    set_group_configs(broker, "watched", share_auto_offset_reset="earliest")
    c = consumer(broker, "watched", name, **{"share.acknowledgement.mode": "explicit"})
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        batch = [m for m in c.poll(0.5) if m.error() is None]
        for m in batch:
            kind = {b"3": AcknowledgeType.REJECT, b"5": AcknowledgeType.RELEASE}.get(m.value(), AcknowledgeType.ACCEPT)
            if int(m.value()) < 8:  # 8 and 9 are still held when the metrics are read
                c.acknowledge(m, kind)
            got.append(m)
        if batch and int(batch[-1].value()) < 8:
            c.commit_sync()
    c.commit_sync()
    labels = {"sharegroup": "watched", "topic": name, "partition": "0"}
    deadline = time.monotonic() + 20
    while True:
        samples = scrape(broker)
        if value(samples, "kafka_server_share_group_metrics_record_acknowledgement_total", ack_type="Accept") >= 6:
            break
        assert time.monotonic() < deadline, "the acknowledgements never showed"
        time.sleep(0.3)
    assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="share") == 1
    assert value(samples, "kafka_server_group_coordinator_metrics_share_group_count", state="Stable") == 1
    assert value(samples, "kafka_sharegroup_members", sharegroup="watched") == 1
    assert value(samples, "kafka_server_share_group_metrics_record_acknowledgement_total", ack_type="Reject") == 1
    assert value(samples, "kafka_server_share_group_metrics_record_acknowledgement_total", ack_type="Release") == 1
    assert value(samples, "kafka_server_share_group_metrics_partition_load_time_ms_count") >= 1
    # 0-4 done: the SPSO is 5 (released, Available again); 6 and 7 done past it; 8 and 9 held
    assert value(samples, "kafka_sharegroup_start_offset", **labels) == 5
    assert value(samples, "kafka_sharegroup_records", state="Available", **labels) == 1
    assert value(samples, "kafka_sharegroup_records", state="Acquired", **labels) == 2
    assert value(samples, "kafka_sharegroup_records", state="Acknowledged", **labels) == 2
    assert value(samples, "kafka_sharegroup_lag", **labels) == 3  # 5, 8 and 9
    assert trio.run(share_lags, [broker], "watched") == {name: {0: (5, 3)}}  # DescribeShareGroupOffsets v1
    described = share_groups_cli(broker, "--describe", "--group", "watched", "--offsets")
    assert described[1] == ["watched", name, "0", "5", "3"]  # not 10 - 5: 6 and 7 are done
    if chromium() is not None:  # make setup installs Debian's chromium
        url = broker.metrics_url.removesuffix("metrics") + "groups/watched"
        dom = screenshot(
            url, Path(__file__).resolve().parents[2] / "build" / "screenshots" / "console" / "share-group.png"
        )
        assert "state <b>Stable</b>, protocol share (KIP-932)" in dom
        assert "Share-partitions" in dom and "rdkafka" in dom  # the member's client id
        # partition, leader, SPSO, SPEO, available, acquired, acknowledged, archived, counts, lag
        cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", dom)]
        row = cells[cells.index(f"{name}-0") :][:10]
        assert row == [f"{name}-0", "1", "5", "10", "1", "2", "2", "0", "1-1", "3"], row
        listing = rendered_dom(url.removesuffix("/watched"))
        assert re.search(r"watched</a></td><td>share</td><td>Stable</td><td>1</td><td>1</td><td>3</td>", listing)
    c.close()
