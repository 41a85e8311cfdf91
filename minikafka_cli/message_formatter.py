"""How `minikafka consume` prints a record, as Kafka's console consumer's DefaultMessageFormatter
does (kafka-console-consumer.sh `--property`, Kafka 3.8):

fields in this order, each only when asked for, separated by `key.separator` (default TAB):
`CreateTime:<ms>` or `LogAppendTime:<ms>` (print.timestamp), `Partition:<p>` (print.partition),
`Offset:<o>` (print.offset), `Delivery:<count>` (print.delivery, share groups), the headers as
`k:v` joined by `headers.separator` or `NO_HEADERS` (print.headers), the key (print.key) and the
value (print.value, on by default), then `line.separator` (default newline). A null key, value or
header value prints as `null.literal` (default `null`).

Pure: no I/O. `format(...)` -> the text to write.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the `--property` keys of Kafka's DefaultMessageFormatter this formatter understands
PROPERTIES = (
    "print.timestamp",
    "print.partition",
    "print.offset",
    "print.delivery",
    "print.headers",
    "print.key",
    "print.value",
    "key.separator",
    "line.separator",
    "headers.separator",
    "null.literal",
)


@dataclass
class MessageFormatter:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_delivery: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: dict[str, str], **defaults) -> MessageFormatter:
        """The formatter for Kafka's `--property` settings over `defaults` (field names); raises
        ValueError for an unknown key or a flag that is not true/false. As Kafka, a flag is true
        only when it reads "true" in any case."""
        unknown = sorted(set(props) - set(PROPERTIES))
        if unknown:
            raise ValueError(f"unknown --property {unknown[0]} (known: {', '.join(PROPERTIES)})")
        formatter = cls(**defaults)
        for key, value in props.items():
            field = key.replace(".", "_")
            if key.startswith("print."):
                if value.strip().lower() not in ("true", "false"):
                    raise ValueError(f"--property {key}={value}: expected true or false")
                setattr(formatter, field, value.strip().lower() == "true")
            else:  # taken as typed, as Kafka takes it (a shell's $'\t' gives a TAB)
                setattr(formatter, field, value)
        return formatter

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", errors="replace")

    def format(
        self,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers,
        *,
        log_append_time: bool = False,
        delivery_count: int | None = None,
    ) -> str:
        """One record as Kafka's console consumer prints it, its line separator included.
        `headers`: (key, value) pairs or objects with `.key` / `.value`."""
        fields = []
        if self.print_timestamp:
            fields.append(f"{'LogAppendTime' if log_append_time else 'CreateTime'}:{timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{partition}")
        if self.print_offset:
            fields.append(f"Offset:{offset}")
        if self.print_delivery:
            fields.append(f"Delivery:{'NONE' if delivery_count is None else delivery_count}")
        if self.print_headers:
            pairs = [(h.key, h.value) if hasattr(h, "key") else h for h in headers]
            fields.append(
                self.headers_separator.join(f"{k}:{self._text(v)}" for k, v in pairs) if pairs else "NO_HEADERS"
            )
        if self.print_key:
            fields.append(self._text(key))
        if self.print_value:
            fields.append(self._text(value))
        return self.key_separator.join(fields) + self.line_separator if fields else ""
