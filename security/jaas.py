"""Kafka's `sasl.jaas.config` values (Kafka's `JaasConfig`), parsed without Java: one or more
`<login module class> <flag> key="value" ...;` entries, e.g.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice";

Values are double-quoted (with `\\"` and `\\\\` escapes) or bare words. Flags are JAAS's
required / requisite / sufficient / optional. Raises `InvalidJaasConfig` with Kafka's reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = {"required", "requisite", "sufficient", "optional"}
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S)


class InvalidJaasConfig(ValueError):
    pass


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise InvalidJaasConfig(f"unexpected character at {pos} in the JAAS config")
        pos = m.end()
        if m.group("quoted") is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", m.group("quoted")[1:-1])))
        elif m.group("word") is not None:
            out.append(("word", m.group("word")))
        else:
            out.append(("punct", m.group("punct")))
    return out


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a `sasl.jaas.config` value."""
    tokens = _tokens(text)
    modules, i = [], 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise InvalidJaasConfig("a JAAS entry starts with a login module class and a control flag")
        class_name, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in FLAGS:
            raise InvalidJaasConfig(f"Invalid control flag '{tokens[i + 1][1]}'")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("punct", ";"):
            if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("punct", "="):
                raise InvalidJaasConfig(f"expected key=value in the options of {class_name}")
            if tokens[i + 2][0] not in ("value", "word"):
                raise InvalidJaasConfig(f"option {tokens[i][1]} of {class_name} has no value")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise InvalidJaasConfig("JAAS config entry not terminated by semi-colon")
        i += 1
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise InvalidJaasConfig("the JAAS config holds no login module")
    return modules
