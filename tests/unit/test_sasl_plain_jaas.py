"""Kafka's sasl.jaas.config values parsed as Kafka's JaasConfig does, and SASL/PLAIN answered as
Kafka's PlainSaslServer does (users from `user_<name>` options, Kafka's failure messages)."""

import pytest

from security.jaas import InvalidJaasConfig, parse_jaas_config
from security.plain import PlainError, authenticate, client_message, plain_users

BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
    '    username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" one";'
)


def test_jaas_parsing():
    (module,) = parse_jaas_config(BROKER_JAAS)
    assert module.flag == "required" and module.class_name.endswith("PlainLoginModule")
    assert module.options["user_alice"] == 'a "quoted" one'
    two = parse_jaas_config(
        'a.B optional k=v; org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED username="u" password="p";'
    )
    assert [m.flag for m in two] == ["optional", "required"] and two[0].options == {"k": "v"}
    for bad in ["", "a.B required", "a.B always;", 'a.B required k="v"', "a.B required k=;", 'a.B required "x";']:
        with pytest.raises(InvalidJaasConfig):
            parse_jaas_config(bad)


def test_plain():
    users = plain_users(parse_jaas_config(BROKER_JAAS))
    assert users == {"admin": "admin-secret", "alice": 'a "quoted" one'}
    assert authenticate(client_message("admin", "admin-secret"), users) == "admin"
    assert authenticate(b"admin\0admin\0admin-secret", users) == "admin"
    cases = {
        client_message("admin", "nope"): "Invalid username or password",
        client_message("mallory", "x"): "Invalid username or password",
        b"alice\0admin\0admin-secret": "authorization id that is different",
        b"\0\0pw": "username not specified",
        b"\0admin\0": "password not specified",
        b"garbage": "expected 3 tokens",
        b"\xff\0\xfe\0": "expected 3 tokens",
    }
    for message, reason in cases.items():
        with pytest.raises(PlainError, match=reason):
            authenticate(message, users)
