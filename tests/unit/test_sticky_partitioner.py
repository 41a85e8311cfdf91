"""The sticky partitioner for records without key (KIP-480): one partition per topic until
batch.size bytes went to it, then the next, wrapping; topics are independent."""

from protocol.partitioner import StickyPartitioner


def test_records_fill_one_partition_at_a_time_then_move_on():
    sticky = StickyPartitioner(batch_size=100)
    chosen = [sticky.partition("t", 3, 30) for _ in range(12)]
    # 4 records of 30 bytes reach 100 bytes (120): the 5th goes to the next partition
    runs = [chosen[i : i + 4] for i in range(0, 12, 4)]
    assert all(len(set(run)) == 1 for run in runs), chosen
    first = runs[0][0]
    assert [run[0] for run in runs] == [first, (first + 1) % 3, (first + 2) % 3]
    assert sticky.partition("t", 3, 30) == first  # wrapped around


def test_topics_are_independent_and_a_shrunk_count_is_respected():
    sticky = StickyPartitioner(batch_size=10)
    a = sticky.partition("a", 4, 5)
    b = sticky.partition("b", 4, 5)
    assert sticky.partition("a", 4, 5) == a and sticky.partition("b", 4, 5) == b
    assert all(0 <= sticky.partition("a", 1, 5) < 1 for _ in range(5))


def test_the_first_partition_is_not_always_the_same():
    assert len({StickyPartitioner(100).partition("t", 8, 1) for _ in range(200)}) > 1
