"""SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` answers it, pure: the client sends
`authzid NUL authcid NUL password`; the server checks the password against the JAAS option
`user_<name>` of its PlainLoginModule (`listener.name.<l>.plain.sasl.jaas.config`). Failures raise
`PlainError` with Kafka's message (SASL_AUTHENTICATION_FAILED)."""

from __future__ import annotations

import hmac

from security.jaas import LoginModule

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class PlainError(Exception):
    pass


def plain_users(modules: list[LoginModule]) -> dict[str, str]:
    """{user: password} from a PlainLoginModule's `user_<name>` options."""
    users: dict[str, str] = {}
    for module in modules:
        if module.class_name == PLAIN_LOGIN_MODULE:
            users.update({k[len("user_") :]: v for k, v in module.options.items() if k.startswith("user_")})
    return users


def authenticate(message: bytes, users: dict[str, str]) -> str:
    """The authenticated user name of a PLAIN client message."""
    try:
        authzid, authcid, password = message.decode("utf-8").split("\0")
    except (UnicodeDecodeError, ValueError):
        raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens") from None
    if not authcid:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    expected = users.get(authcid)
    if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != authcid:
        raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
    return authcid


def client_message(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()
