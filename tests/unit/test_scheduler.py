"""Periodic tasks survive their failures (issue 15: an EMFILE in the HW checkpoint ended the broker)."""

import errno
import logging

import trio

from storage.scheduler import run_periodically


async def test_a_failing_run_is_logged_and_the_task_runs_again(autojump_clock, caplog):
    runs = []

    async def job():
        runs.append(trio.current_time())
        if len(runs) in (2, 3):
            raise OSError(errno.EMFILE, "Too many open files")

    with caplog.at_level(logging.ERROR, logger="storage.scheduler"):
        with trio.move_on_after(10.5):
            await run_periodically("hw checkpoint", 2.0, job)
    assert len(runs) == 5 and [round(b - a) for a, b in zip(runs, runs[1:])] == [2, 2, 2, 2]
    assert caplog.text.count("periodic task hw checkpoint failed") == 2 and "Too many open files" in caplog.text
