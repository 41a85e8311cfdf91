"""What the network layer needs to know about each listener's security: its TLS context (SSL,
SASL_SSL), how to start a SASL exchange (SASL_PLAINTEXT, SASL_SSL), and how a client
certificate becomes a principal. Built once from the broker's settings (`security/config.py`);
SCRAM credentials are looked up in the live `CredentialCache` at each exchange, so changes made
through AlterUserScramCredentials apply to the next connection.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from security import plain
from security.authenticator import SaslServerAuthenticator
from security.config import ListenerSecurity, SecurityProtocol
from security.credentials import CredentialCache
from security.principal import PrincipalMappingError, from_certificate
from security.ssl_context import server_context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListenerTransport:
    name: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    new_authenticator: Callable[[], SaslServerAuthenticator] | None = None
    principal_mapping_rules: str = "DEFAULT"

    def principal_from_certificate(self, cert: dict | None) -> str | None:
        """The principal of a TLS client (ANONYMOUS without a certificate); None when
        `ssl.principal.mapping.rules` has no rule for it (Kafka then refuses the connection)."""
        try:
            return from_certificate(cert, self.principal_mapping_rules)
        except PrincipalMappingError as e:
            log.warning("refusing a client certificate: %s", e)
            return None


PLAINTEXT_TRANSPORT = ListenerTransport("PLAINTEXT", SecurityProtocol.PLAINTEXT)


def build_transports(
    listeners: dict[str, ListenerSecurity], credentials: CredentialCache
) -> dict[str, ListenerTransport]:
    """One transport per listener. Raises SecurityConfigError (a keystore or truststore that
    cannot be loaded)."""
    out = {}
    for name, security in listeners.items():
        context = server_context(security.ssl) if security.ssl is not None else None
        factory = None
        if security.protocol.uses_sasl:
            users = plain.plain_users(security.jaas.get("PLAIN", []))
            mechanisms = security.sasl_mechanisms

            def factory(mechanisms=mechanisms, users=users) -> SaslServerAuthenticator:
                return SaslServerAuthenticator(mechanisms, lambda: users, credentials.get)

        rules = security.ssl.principal_mapping_rules if security.ssl is not None else "DEFAULT"
        out[name] = ListenerTransport(name, security.protocol, context, factory, rules)
    return out
