"""The log cleaner's trio shell over a real LogManager: cleanings run in worker processes, the
dirtiest log goes first, the checkpoint is Kafka's file, and changes made while a cleaning runs win
(no broker, no sockets)."""

import trio
from broker_helpers import component_config
from storage_helpers import keyed_batch, latest_by_key

from storage import checkpoint
from storage.cleaner.log_cleaner import CleanerConfig, LogCleaner
from storage.cleaner.manager import CLEANER_CHECKPOINT
from storage.config import LogConfig
from storage.log_manager import LogManager

COMPACT = LogConfig(segment_bytes=4000, index_interval_bytes=200, cleanup_policy=("compact",))
DELETE = LogConfig(segment_bytes=4000, index_interval_bytes=200)


def manager(tmp_path, configs):
    lm = LogManager([tmp_path / "d"], DELETE, topic_config=lambda topic: configs[topic])
    lm.startup()
    return lm


def write(lg, rounds, keys=10):
    for r in range(rounds):
        lg.append_as_leader(keyed_batch([(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)]), leader_epoch=0)


async def wait_for(predicate, timeout=30):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


async def test_the_cleaner_compacts_compacted_logs_only_and_checkpoints(tmp_path):
    lm = manager(tmp_path, {"c": COMPACT, "d": DELETE})
    compacted, plain = lm.get_or_create_log(("c", 0)), lm.get_or_create_log(("d", 0))
    write(compacted, 40)
    write(plain, 40)
    before = latest_by_key(compacted)
    size_plain = plain.size
    cleaner = LogCleaner(lm, component_config(CleanerConfig, backoff_ms=50))
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)
        await wait_for(lambda: cleaner.cleanings >= 1)
        nursery.cancel_scope.cancel()
    assert latest_by_key(compacted) == before
    assert compacted.size < 4000 * 2 and plain.size == size_plain
    first_dirty = compacted.active_segment.base_offset
    assert checkpoint.read_offsets(tmp_path / "d" / CLEANER_CHECKPOINT) == {("c", 0): first_dirty}
    state = {ltc.tp: ltc for ltc in cleaner.state()}
    assert set(state) == {("c", 0)} and state[("c", 0)].first_dirty_offset == first_dirty
    assert state[("c", 0)].dirty_ratio == 0
    lm.shutdown()


async def test_the_filthiest_log_goes_first_and_a_truncation_discards_the_cleaning(tmp_path):
    lm = manager(tmp_path, {"a": COMPACT, "b": COMPACT})
    a, b = lm.get_or_create_log(("a", 0)), lm.get_or_create_log(("b", 0))
    write(a, 40)
    write(b, 40)
    cleaner = LogCleaner(lm, component_config(CleanerConfig, backoff_ms=10**6))
    # `a` was cleaned up to its last inactive segment: a small dirty section; `b` is all dirty
    cleaner.manager.checkpoints[tmp_path / "d"] = {("a", 0): a.segments[-2].base_offset}
    ratios = {ltc.tp: ltc.dirty_ratio for ltc in cleaner.state()}
    assert 0 < ratios[("a", 0)] < 0.5 and ratios[("b", 0)] == 1.0
    ltc = cleaner.manager.grab_filthiest_log(cleaner._logs(), cleaner.high_watermark)
    assert ltc is not None and ltc.tp == ("b", 0) and ltc.first_dirty_offset == 0
    # `a` is below min.cleanable.dirty.ratio (0.5): nothing else is cleanable now
    assert cleaner.manager.grab_filthiest_log(cleaner._logs(), cleaner.high_watermark) is None
    lg = ltc.log

    async def truncate_meanwhile():
        await trio.sleep(0)
        lg.truncate_to(lg.segments[1].base_offset)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(truncate_meanwhile)
        result = await cleaner.clean_log(ltc)
    assert result is None and cleaner.cleanings == 0
    assert not list(lg.dir.glob("*.cleaned")) and ltc.tp not in cleaner.manager.in_progress
    lm.shutdown()


async def test_a_log_deleted_while_cleaned_leaves_nothing_behind(tmp_path):
    lm = manager(tmp_path, {"c": COMPACT})
    lg = lm.get_or_create_log(("c", 0))
    write(lg, 40)
    cleaner = LogCleaner(lm, component_config(CleanerConfig, backoff_ms=10**6))
    ltc = cleaner.manager.grab_filthiest_log(cleaner._logs(), cleaner.high_watermark)

    async def delete_meanwhile():
        await trio.sleep(0)
        lm.delete_log(("c", 0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(delete_meanwhile)
        assert await cleaner.clean_log(ltc) is None
    assert sorted(p.name for p in (tmp_path / "d").iterdir() if p.is_dir()) == []
    lm.shutdown()


async def test_disabled_cleaner_does_nothing(tmp_path):
    lm = manager(tmp_path, {"c": COMPACT})
    write(lm.get_or_create_log(("c", 0)), 40)
    cleaner = LogCleaner(lm, component_config(CleanerConfig, enable=False, backoff_ms=10))
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)
        await trio.sleep(0.5)
        nursery.cancel_scope.cancel()
    assert cleaner.cleanings == 0
    lm.shutdown()


async def test_two_cleaner_threads_clean_two_logs_at_once(tmp_path):
    lm = manager(tmp_path, {"a": COMPACT, "b": COMPACT})
    a, b = lm.get_or_create_log(("a", 0)), lm.get_or_create_log(("b", 0))
    write(a, 40)
    write(b, 40)
    expected = {("a", 0): latest_by_key(a), ("b", 0): latest_by_key(b)}
    cleaner = LogCleaner(lm, component_config(CleanerConfig, threads=2, backoff_ms=50))
    busy = []

    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)

        async def watch():
            while True:
                busy.append(len(cleaner.manager.in_progress))
                await trio.sleep(0.01)

        nursery.start_soon(watch)
        await wait_for(lambda: cleaner.cleanings >= 2)
        nursery.cancel_scope.cancel()
    assert max(busy) == 2  # both in progress at once, each in its own worker process
    assert {tp: latest_by_key(lm.get_log(tp)) for tp in expected} == expected
    lm.shutdown()


async def test_replaced_segments_are_removed_file_delete_delay_ms_later(tmp_path):
    from dataclasses import replace

    lm = manager(tmp_path, {"c": replace(COMPACT, file_delete_delay_ms=700)})
    lg = lm.get_or_create_log(("c", 0))
    write(lg, 40)
    cleaner = LogCleaner(lm, component_config(CleanerConfig, backoff_ms=50))
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)
        await wait_for(lambda: cleaner.cleanings >= 1)
        assert list(lg.dir.glob("*.deleted"))  # renamed at once (Kafka's asynchronous delete)
        await wait_for(lambda: not list(lg.dir.glob("*.deleted")), timeout=5)
        nursery.cancel_scope.cancel()
    lm.shutdown()
