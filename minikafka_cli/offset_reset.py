"""The new offsets of an offset reset, as Kafka's tools compute them (`kafka-consumer-groups.sh`
and `kafka-share-groups.sh --reset-offsets`): `--to-earliest` (the log start offset),
`--to-latest` (the high watermark), `--to-offset N`, `--to-datetime T` (the first offset at or
after T, ListOffsets by timestamp; the high watermark when there is none) and, for consumer
groups, `--shift-by N` (from the committed offset), `--to-current` (the committed offset; the high
watermark where there is none) and `--by-duration PnDTnHnMnS` (as --to-datetime, at now minus
the ISO 8601 duration). Every result is clamped to the partition's [log start offset, high
watermark].
"""

from __future__ import annotations

import argparse
import datetime
import re
import time

from client import Cluster
from client.reads import EARLIEST, LATEST, list_offset


def add_arguments(parser: argparse.ArgumentParser, *, shift: bool) -> None:
    spec = parser.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="reset-offsets: to the log start offset")
    spec.add_argument("--to-latest", action="store_true", help="reset-offsets: to the high watermark")
    spec.add_argument("--to-offset", type=int, help="reset-offsets: to this offset")
    spec.add_argument("--to-datetime", help="reset-offsets: YYYY-MM-DDTHH:mm:SS[.sss][+hh:mm] (UTC if no zone)")
    if shift:
        spec.add_argument("--shift-by", type=int, help="reset-offsets: the committed offset plus N (N may be negative)")
        spec.add_argument(
            "--to-current", action="store_true", help="reset-offsets: to the committed offset (the latest where none)"
        )
        spec.add_argument(
            "--by-duration",
            metavar="PnDTnHnMnS",
            help="reset-offsets: to the first offset at or after now minus this ISO 8601 duration (e.g. PT1H30M)",
        )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="reset-offsets: show the new offsets only (default)")
    mode.add_argument("--execute", action="store_true", help="reset-offsets: apply the new offsets")


def require_spec(args: argparse.Namespace) -> None:
    """Raises ValueError unless one reset specification was given."""
    given = (
        args.to_earliest,
        args.to_latest,
        args.to_datetime,
        args.to_offset is not None,
        getattr(args, "shift_by", None) is not None,
        getattr(args, "to_current", False),
        getattr(args, "by_duration", None),
    )
    if not any(given):
        names = "--to-earliest, --to-latest, --to-offset, --to-datetime" + (
            ", --shift-by, --to-current, --by-duration" if hasattr(args, "shift_by") else ""
        )
        raise ValueError(f"reset-offsets needs one of {names}")
    if args.to_datetime:
        timestamp_ms(args.to_datetime)
    if getattr(args, "by_duration", None):
        duration_ms(args.by_duration)


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def duration_ms(text: str) -> int:
    """An ISO 8601 duration as Kafka's --by-duration takes it (PnDTnHnMnS, e.g. P1DT2H, PT30M,
    PT0.5S) in ms. Raises ValueError."""
    m = _DURATION.fullmatch(text.upper())
    if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        raise ValueError(f"--by-duration {text}: not an ISO 8601 duration such as P1DT2H30M or PT15M")
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def timestamp_ms(text: str, option: str = "--to-datetime", *, epoch_ms: bool = False) -> int:
    """ms since the epoch of an ISO-8601 time (UTC when it names no zone), or, with `epoch_ms`, of
    a plain number of ms. Raises ValueError naming `option`."""
    if epoch_ms and text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        expected = "ms since the epoch nor an ISO 8601 date-time" if epoch_ms else "YYYY-MM-DDTHH:mm:SS[.sss]"
        raise ValueError(f"{option} {text}: not {expected}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


async def new_offset(
    cluster: Cluster, args: argparse.Namespace, topic: str, partition: int, current: int | None
) -> int:
    """The offset `args` resets (topic, partition) to; `current`: the committed offset (for
    --shift-by; None: the high watermark)."""
    earliest = await list_offset(cluster, topic, partition, EARLIEST)
    latest = await list_offset(cluster, topic, partition, LATEST)
    if args.to_earliest:
        new = earliest
    elif args.to_latest:
        new = latest
    elif args.to_offset is not None:
        new = args.to_offset
    elif args.to_datetime or getattr(args, "by_duration", None):
        when = (
            timestamp_ms(args.to_datetime)
            if args.to_datetime
            else int(time.time() * 1000) - duration_ms(args.by_duration)
        )
        found = await list_offset(cluster, topic, partition, when)
        new = latest if found < 0 else found
    elif getattr(args, "to_current", False):
        new = latest if current is None else current
    else:
        new = (latest if current is None else current) + args.shift_by
    return min(max(new, earliest), latest)
