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


_SECTION = re.compile(r"\s*([A-Za-z0-9_.-]+)\s*\{(.*?)\}\s*;", re.S)


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """The sections of a JAAS login configuration file (what Java's
    `-Djava.security.auth.login.config` names): `Name { <entries> };` each, e.g. ZooKeeper's
    `Client` (a broker's login to ZooKeeper) or `Server`. `//` and `/* */` comments are allowed.
    Raises InvalidJaasConfig."""
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)
    sections: dict[str, list[LoginModule]] = {}
    pos = 0
    while text[pos:].strip():
        m = _SECTION.match(text, pos)
        if m is None:
            raise InvalidJaasConfig(f"expected 'Name {{ ... }};' at {pos} in the JAAS file")
        sections[m.group(1)] = parse_jaas_config(m.group(2))
        pos = m.end()
    return sections


def zookeeper_client_login(text: str, section: str = "Client") -> tuple[str, str] | None:
    """(username, password) of the DigestLoginModule in `section` of a JAAS file (ZooKeeper's
    SASL DIGEST-MD5 login, as Kafka's brokers read it); None when the section is absent."""
    modules = parse_jaas_file(text).get(section)
    if not modules:
        return None
    options = modules[0].options
    if "username" not in options or "password" not in options:
        raise InvalidJaasConfig(f"the JAAS section {section} needs username and password")
    return options["username"], options["password"]
