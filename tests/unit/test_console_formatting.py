"""`minikafka consume`'s output and options in Kafka's console consumer's terms (issue 49)."""

import argparse

import pytest

from client.reads import EARLIEST, LATEST
from minikafka_cli import consume
from minikafka_cli.message_formatter import MessageFormatter
from protocol.record_batch import Header


def test_value_only_by_default_and_null_literal():
    assert MessageFormatter().format(0, 5, 1, b"k", b"v", ()) == "v\n"
    assert MessageFormatter().format(0, 5, 1, b"k", None, ()) == "null\n"


def test_every_field_in_kafkas_order_and_labels():
    formatter = MessageFormatter.from_properties(
        {
            "print.timestamp": "true",
            "print.partition": "true",
            "print.offset": "TRUE",
            "print.headers": "true",
            "print.key": "true",
            "key.separator": " | ",
            "null.literal": "<nil>",
        }
    )
    headers = (Header("a", b"1"), Header("b", None))
    assert (
        formatter.format(3, 42, 1700000000000, None, b"v", headers)
        == "CreateTime:1700000000000 | Partition:3 | Offset:42 | a:1,b:<nil> | <nil> | v\n"
    )
    assert formatter.format(3, 42, 7, b"k", b"v", (), log_append_time=True).startswith("LogAppendTime:7 | ")
    assert " | NO_HEADERS | " in formatter.format(3, 42, 7, b"k", b"v", ())


def test_print_value_false_and_delivery_count():
    formatter = MessageFormatter.from_properties(
        {"print.value": "false", "print.key": "true", "print.delivery": "true"}
    )
    assert formatter.format(0, 0, 0, b"k", b"v", (), delivery_count=2) == "Delivery:2\tk\n"


@pytest.mark.parametrize(
    ("props", "message"),
    [({"print.kee": "true"}, "unknown --property print.kee"), ({"print.key": "yes"}, "expected true or false")],
)
def test_bad_properties_are_refused(props, message):
    with pytest.raises(ValueError, match=message):
        MessageFormatter.from_properties(props)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    consume.add_arguments(parser)
    args = parser.parse_args(["--bootstrap-server", "h:1", "--topic", "t", *argv])
    consume.resolve(args)
    return args


def test_where_reading_starts():
    assert _args().start == LATEST
    assert _args("--from-beginning").start == EARLIEST
    assert _args("--offset", "earliest").start == EARLIEST
    assert _args("--offset", "latest").start == LATEST
    assert _args("--offset", "7", "--partition", "0").start == 7
    assert _args("--consumer-property", "auto.offset.reset=earliest").start == EARLIEST
    assert _args("--from-timestamp", "1700000000000").start == consume.FromTimestamp(1700000000000)
    assert _args("--from-timestamp", "2023-11-14T22:13:20Z").start == consume.FromTimestamp(1700000000000)
    assert _args("--from-timestamp", "2023-11-14T22:13:20").start == consume.FromTimestamp(1700000000000)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--offset", "abc"], "--offset abc: expected a number >= 0, earliest or latest"),
        (["--offset", "7"], "--offset N needs --partition"),
        (["--offset", "7", "--partition", "0", "--from-beginning"], "one of them"),
        (["--from-timestamp", "yesterday"], "not ms since the epoch nor an ISO 8601 date-time"),
        (["--consumer-property", "fetch.min.bytes=1"], "unknown --consumer-property fetch.min.bytes"),
        (["--consumer-property", "isolation.level=serializable"], "expected read_uncommitted, read_committed"),
        (["--property", "print.key"], "--property print.key is not KEY=VALUE"),
    ],
)
def test_mistyped_options_are_named(argv, message):
    with pytest.raises(ValueError, match=message):
        _args(*argv)


def test_kafka_property_spellings_set_the_options():
    args = _args("--consumer-property", "group.id=g", "--consumer-property", "isolation.level=read_committed")
    assert (args.group, args.isolation_level) == ("g", "read_committed")
    assert _args("--property", "print.key=true").formatter.print_key
