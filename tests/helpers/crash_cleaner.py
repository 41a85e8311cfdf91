"""Crash-test cleaner: open a log dir as a broker does, clean its compacted log once, and die by
SIGKILL at a given step.

Usage: python crash_cleaner.py DIR STEP [IO_BYTES_PER_SECOND]. STEP is one of LogCleaner's steps
("cleaned": the `.cleaned` files are written; "swap", "deleted", "done": after that swap step) or
"never" (the parent kills it, e.g. while a throttled cleaning is still writing). Prints `step <name>`
as each step is reached.
"""

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import trio  # noqa: E402
from broker_helpers import component_config  # noqa: E402

from storage.cleaner.log_cleaner import CleanerConfig, LogCleaner  # noqa: E402
from storage.config import LogConfig  # noqa: E402
from storage.log_manager import LogManager  # noqa: E402

CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512, cleanup_policy=("compact",))


def main() -> None:
    root, kill_at = Path(sys.argv[1]), sys.argv[2]
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else float("inf")
    lm = LogManager([root], CONFIG)
    lm.startup()

    def step(name: str) -> None:
        print(f"step {name}", flush=True)
        if name == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    cleaner = LogCleaner(lm, component_config(CleanerConfig, io_max_bytes_per_second=rate), step_hook=step)

    async def run():
        ltc = cleaner.manager.grab_filthiest_log(cleaner._logs(), cleaner.high_watermark)
        assert ltc is not None, "nothing to clean"
        print("cleaning", flush=True)
        await cleaner.clean_log(ltc)
        print("cleaned all", flush=True)

    trio.run(run)
    os.kill(os.getpid(), signal.SIGKILL)  # never a clean shutdown


if __name__ == "__main__":
    main()
