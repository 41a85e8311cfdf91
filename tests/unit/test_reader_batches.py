"""What a reader shows of fetched batches (client/reads.reader_batches): never markers, and under
read_committed nothing of an aborted transaction, as Kafka's consumer filters them."""

from client.reads import reader_batches
from protocol import record_batch as rb
from protocol.control_records import marker_batch


def stamped(batches: list[bytes]) -> bytes:
    out, offset = bytearray(), 0
    for b in batches:
        buf = bytearray(b)
        rb.stamp_batch(buf, 0, offset, 0)
        offset += rb.read_header(buf).last_offset_delta + 1
        out += buf
    return bytes(out)


def txn(pid: int, value: bytes) -> bytes:
    return rb.build_batch([(None, value)], producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)


def shown(data: bytes, aborted) -> list[bytes]:
    return [
        r.value for pos, h, visible in reader_batches(data, aborted) if visible for r in rb.decode_records(data, pos, h)
    ]


def test_aborted_batches_and_markers_are_hidden():
    data = stamped(
        [
            txn(1, b"a1"),  # 0: producer 1, aborted below
            txn(2, b"c1"),  # 1: producer 2, committed
            rb.build_batch([(None, b"plain")]),  # 2
            marker_batch(1, 0, 0, commit=False),  # 3
            txn(1, b"c2"),  # 4: producer 1 again, a new (committed) transaction
            marker_batch(2, 0, 0, commit=True),  # 5
            marker_batch(1, 0, 0, commit=True),  # 6
        ]
    )
    assert shown(data, [(1, 0)]) == [b"c1", b"plain", b"c2"]
    assert shown(data, None) == [b"a1", b"c1", b"plain", b"c2"]  # read_uncommitted: no markers
    assert [visible for _, _, visible in reader_batches(data, [(1, 0)])] == [
        False,
        True,
        True,
        False,
        True,
        False,
        False,
    ]


def test_an_aborted_transaction_without_data_here_hides_nothing():
    """An ABORT marker whose transaction wrote nothing to this partition (the client dropped its
    records before sending them): the producer's next transaction stays visible."""
    data = stamped(
        [
            txn(1, b"c1"),  # 0
            marker_batch(1, 0, 0, commit=True),  # 1
            marker_batch(1, 0, 0, commit=False),  # 2: an aborted transaction with no data here
            txn(1, b"c2"),  # 3
            marker_batch(1, 0, 0, commit=True),  # 4
        ]
    )
    assert shown(data, [(1, 2)]) == [b"c1", b"c2"]
