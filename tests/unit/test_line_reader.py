"""`minikafka produce`'s line reader against Kafka's LineMessageReader rules (issue 49)."""

import pytest

from minikafka_cli.line_reader import LineError, LineReader


def test_plain_lines_are_values_without_key_or_headers():
    assert LineReader().parse(1, b"hello\tworld") == (None, b"hello\tworld", [])


def test_parse_key_splits_at_the_first_separator():
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":"})
    assert reader.parse(1, b"k:v:w") == (b"k", b"v:w", [])
    assert reader.parse(2, b":v") == (b"", b"v", [])


def test_a_line_without_the_key_separator_is_refused_in_kafkas_words_unless_errors_are_ignored():
    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":"})
    with pytest.raises(LineError, match=r"^No key separator found on line number 7: 'hhh'$"):
        reader.parse(7, b"hhh")
    lenient = LineReader.from_properties({"parse.key": "true", "key.separator": ":", "ignore.error": "true"})
    assert lenient.parse(7, b"hhh") == (None, b"hhh", [])


def test_headers_then_key_then_value_with_a_null_marker():
    reader = LineReader.from_properties({"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    assert reader.parse(1, b"h1:a,h2:NULL\tkey\tNULL") == (b"key", None, [("h1", b"a"), ("h2", None)])
    with pytest.raises(LineError, match="No header key separator found in pair 'bad' on line number 2"):
        reader.parse(2, b"bad\tk\tv")
    with pytest.raises(LineError, match="No headers delimiter found on line number 3"):
        reader.parse(3, b"no-delimiter")


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"parse.kee": "true"}, "unknown --property parse.kee"),
        ({"parse.key": "yes"}, "parse.key=yes: expected true or false"),
        ({"key.separator": ""}, "key.separator must not be empty"),
    ],
)
def test_bad_properties_are_refused_by_name(props, message):
    with pytest.raises(ValueError, match=message):
        LineReader.from_properties(props)
