"""How `minikafka produce` turns a line of input into a record, as Kafka's console producer's
`LineMessageReader` does (kafka-console-producer.sh `--property`, Kafka 3.8):

- `parse.key=true`: the key is the text before the first `key.separator` (default TAB), the value
  what follows. A line without the separator is refused (`LineError`, Kafka's message "No key
  separator found on line number N: '...'") unless `ignore.error=true`, which sends the whole line
  as the value with a null key.
- `parse.headers=true`: the line starts with headers, ended by `headers.delimiter` (default TAB):
  `k1:v1,k2:v2` (`headers.separator` ",", `headers.key.separator` ":"); a header without its key
  separator is refused ("No header key separator found in pair '...' on line number N").
- `null.marker=TEXT`: a key, value or header value equal to TEXT is sent as null.

Pure: no I/O. `parse(line_number, line)` -> (key, value, headers) as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the `--property` keys of Kafka's LineMessageReader this reader understands
PROPERTIES = (
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
)


class LineError(ValueError):
    """A line the reader's settings cannot turn into a record (Kafka's KafkaException text)."""


def _flag(props: dict[str, str], key: str) -> bool:
    value = props.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"--property {key}={props[key]}: expected true or false")
    return value == "true"


@dataclass(frozen=True)
class LineReader:
    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        """The reader for Kafka's `--property` settings; raises ValueError for an unknown key,
        a flag that is not true/false, or an empty separator."""
        unknown = sorted(set(props) - set(PROPERTIES))
        if unknown:
            raise ValueError(f"unknown --property {unknown[0]} (known: {', '.join(PROPERTIES)})")
        separators = {}
        for key in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if key in props:
                if not props[key]:
                    raise ValueError(f"--property {key} must not be empty")
                separators[key.replace(".", "_")] = props[key].encode()
        marker = props.get("null.marker")
        return cls(
            parse_key=_flag(props, "parse.key"),
            parse_headers=_flag(props, "parse.headers"),
            ignore_error=_flag(props, "ignore.error"),
            null_marker=None if marker is None else marker.encode(),
            **separators,
        )

    def _nullable(self, data: bytes) -> bytes | None:
        return None if self.null_marker is not None and data == self.null_marker else data

    def parse(self, line_number: int, line: bytes) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """One input line (without its end of line) -> (key, value, headers). Raises LineError."""
        rest, headers = line, []
        if self.parse_headers:
            head, sep, rest = line.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise LineError(f"No headers delimiter found on line number {line_number}: '{_show(line)}'")
                head, rest = b"", line
            for pair in filter(None, head.split(self.headers_separator)):
                name, sep, value = pair.partition(self.headers_key_separator)
                if not sep:
                    raise LineError(
                        f"No header key separator found in pair '{_show(pair)}' on line number {line_number}"
                    )
                headers.append((name.decode("utf-8", errors="replace"), self._nullable(value)))
        key = None
        if self.parse_key:
            found, sep, value = rest.partition(self.key_separator)
            if sep:
                key, rest = self._nullable(found), value
            elif not self.ignore_error:
                raise LineError(f"No key separator found on line number {line_number}: '{_show(line)}'")
        return key, self._nullable(rest), headers


def _show(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
