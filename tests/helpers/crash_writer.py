"""Crash-test writer: append batches to a log forever, reporting every flushed offset.

Usage: python crash_writer.py DIR ROUND. Opens DIR as after a crash (recovery from the checkpointed
recovery point), then appends batches whose record values are their own offsets; every few
appends it fsyncs, checkpoints the recovery point, and prints `flushed <offset>`.
"""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol import record_batch as rb  # noqa: E402
from storage import checkpoint  # noqa: E402
from storage.config import LogConfig  # noqa: E402
from storage.log_loader import load_log  # noqa: E402

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512)
TP = ("crash", 0)


def main() -> None:
    root, round_no = Path(sys.argv[1]), int(sys.argv[2])
    cp = root / checkpoint.RECOVERY_POINT_CHECKPOINT
    log = load_log(
        root / "crash-0", CONFIG, clean_shutdown=False, recovery_point=checkpoint.read_offsets(cp).get(TP, 0)
    )
    rnd = random.Random(round_no)
    print(f"opened {log.log_end_offset}", flush=True)
    while True:
        for _ in range(rnd.randint(1, 8)):
            leo = log.log_end_offset
            n = rnd.randint(1, 20)
            records = [(None, b"%d" % (leo + i) + b"." * rnd.randint(0, 300)) for i in range(n)]
            log.append_as_leader(rb.build_batch(records, compression=rnd.choice([0, 0, 1, 4])), leader_epoch=round_no)
        log.flush()
        checkpoint.write_offsets(cp, {TP: log.recovery_point})
        print(f"flushed {log.recovery_point}", flush=True)


if __name__ == "__main__":
    main()
