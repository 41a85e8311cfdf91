"""Leader epoch cache rules (KIP-101, Kafka LeaderEpochFileCache), table-driven."""

import pytest

from storage.epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache


def cache(*entries):
    return LeaderEpochCache(None, list(entries))


@pytest.mark.parametrize(
    "entries,assign,expected",
    [
        ([], (0, 0), [(0, 0)]),
        ([(0, 0)], (0, 5), [(0, 0)]),  # same epoch, later offset: nothing to do
        ([(0, 0), (1, 10)], (2, 20), [(0, 0), (1, 10), (2, 20)]),
        ([(0, 0), (1, 10), (3, 30)], (2, 20), [(0, 0), (1, 10), (2, 20)]),  # higher epochs removed
        ([(0, 0), (1, 10), (2, 20)], (3, 15), [(0, 0), (1, 10), (3, 15)]),  # later start offsets removed
    ],
)
def test_assign(entries, assign, expected):
    c = cache(*entries)
    c.assign(*assign)
    assert c.entries == expected


ENTRIES = [(1, 0), (3, 100), (4, 250)]


@pytest.mark.parametrize(
    "epoch,expected",
    [
        (-1, (UNDEFINED_EPOCH, -1)),
        (4, (4, 300)),  # latest epoch: ends at the LEO
        (3, (3, 250)),  # ends where epoch 4 starts
        (2, (1, 100)),  # unknown epoch between two: the floor epoch, the next start offset
        (0, (0, 0)),  # below every epoch: itself, the first start offset
        (5, (UNDEFINED_EPOCH, -1)),
    ],
)
def test_end_offset_for(epoch, expected):
    assert cache(*ENTRIES).end_offset_for(epoch, 300) == expected


def test_truncation_from_end_and_start():
    c = cache(*ENTRIES)
    c.truncate_from_end(250)
    assert c.entries == [(1, 0), (3, 100)]
    c.truncate_from_start(120)
    assert c.entries == [(3, 120)]
    assert c.epoch_for_offset(119) == UNDEFINED_EPOCH and c.epoch_for_offset(500) == 3


def test_invalid_entries_are_refused():
    with pytest.raises(ValueError):
        cache().assign(-1, 0)
