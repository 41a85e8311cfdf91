"""An incremental fetch session's partitions as each Fetch reads them (KIP-227): the view kept
between fetches follows every added, updated and forgotten partition, and a fetch that keeps its
view (a delayed fetch) does not see later fetches' changes. Pure: no sockets, no logs."""

from broker.fetch_sessions import FetchSessionCache
from protocol.api import decode_request, encode_request
from protocol.framing import FrameDecoder


def fetch_body(session_id: int, epoch: int, partitions: list[tuple[str, int, int]], forgotten=()):
    topics: dict[str, list[dict]] = {}
    for topic, index, offset in partitions:
        topics.setdefault(topic, []).append({"partition": index, "fetch_offset": offset, "partition_max_bytes": 100})
    body = {
        "replica_id": 2,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1000,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": [i]} for t, i in forgotten],
    }
    (frame,) = FrameDecoder().feed(encode_request(1, 12, 1, body, client_id="replica-2"))
    return decode_request(bytes(frame)).body


def offsets(context) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition): p.fetch_offset for t in context.topics for p in t.partitions}


def test_the_view_follows_updates_additions_and_removals():
    cache = FetchSessionCache()
    first = cache.context(fetch_body(0, 0, [("a", 0, 0), ("a", 1, 0), ("b", 0, 0)]))
    sid = first.session_id
    assert offsets(first) == {("a", 0): 0, ("a", 1): 0, ("b", 0): 0}
    second = cache.context(fetch_body(sid, 1, [("a", 1, 5)]))
    assert offsets(second) == {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    third = cache.context(fetch_body(sid, 2, [("a", 1, 7), ("c", 3, 1)], forgotten=[("b", 0)]))
    assert offsets(third) == {("a", 0): 0, ("a", 1): 7, ("c", 3): 1}
    fourth = cache.context(fetch_body(sid, 3, [("a", 0, 2)]))
    assert offsets(fourth) == {("a", 0): 2, ("a", 1): 7, ("c", 3): 1}
    assert [t.topic for t in fourth.topics] == ["a", "c"]
    # what earlier fetches read stays as it was when they were made
    assert offsets(second) == {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    assert offsets(third) == {("a", 0): 0, ("a", 1): 7, ("c", 3): 1}
