"""Who may read the console, under the same rules as the broker's listeners (pure).

- A broker with a SASL listener asks for HTTP Basic credentials and checks them as that listener
  would: a PLAIN user of its JAAS config, or a SCRAM-SHA-256/512 credential stored in ZooKeeper
  (the password is salted with the credential's salt and iterations and compared with its stored
  key). The principal is `User:<name>`.
- A broker whose listeners authenticate with TLS client certificates only (SSL) asks for one: the
  console's TLS handshake requires a certificate its truststore trusts, and the principal is the
  certificate's name under `ssl.principal.mapping.rules`, as on the listener.
- A broker whose listeners are all PLAINTEXT lets anyone in as `User:ANONYMOUS`, as its listeners do.
- When any listener uses TLS, the console is served over TLS only (`tls`: the listener's keystore),
  so no password or page crosses the network in the clear; plain HTTP still serves `/metrics`.
- With the ACL authorizer on, every page needs DESCRIBE on the cluster and the record browser READ
  on the topic, as Kafka's Describe* and Fetch requests do; super users may do everything.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass, replace

from security.acl import AclOperation, ResourceType
from security.authorizer import Authorizer
from security.config import SslSettings
from security.credentials import CredentialCache
from security.principal import PrincipalMappingError, from_certificate
from security.scram import password_matches

CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


@dataclass
class ConsoleAuth:
    """`mode`: "open", "basic" or "certificate"; `plain_users`: {user: password} of the SASL
    listeners' PLAIN logins; `credentials`: `security.credentials.CredentialCache` (SCRAM);
    `authorizer`: `security.authorizer.Authorizer` or None; `tls`: the listener's TLS settings
    (`security.config.SslSettings`) the console serves with, None for plain HTTP;
    `principal_mapping_rules`: how a certificate's name becomes a principal."""

    mode: str
    plain_users: dict[str, str]
    credentials: CredentialCache | None = None
    authorizer: Authorizer | None = None
    tls: SslSettings | None = None
    principal_mapping_rules: str = "DEFAULT"

    def principal(self, authorization: str | None, certificate: dict | None = None) -> str | None:
        """The principal of a request (its Authorization header, or the TLS client certificate
        in certificate mode), or None when it may not enter."""
        if self.mode == "open":
            return ANONYMOUS
        if self.mode == "certificate":
            if not certificate:
                return None
            try:
                return from_certificate(certificate, self.principal_mapping_rules)
            except PrincipalMappingError:
                return None
        if self.mode != "basic" or not authorization or not authorization.lower().startswith("basic "):
            return None
        try:
            user, sep, password = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if not sep or not user:
            return None
        known = self.plain_users.get(user)
        if known is not None and hmac.compare_digest(known.encode(), password.encode()):
            return f"User:{user}"
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = self.credentials.get(mechanism, user) if self.credentials is not None else None
            if credential is None:
                continue
            if password_matches(mechanism, password, credential):
                return f"User:{user}"
        return None

    def may(self, principal: str, host: str, operation: AclOperation, resource: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(principal, host, operation, resource, name)

    def may_view(self, principal: str, host: str) -> bool:
        return self.may(principal, host, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_read(self, principal: str, host: str, topic: str) -> bool:
        return self.may(principal, host, AclOperation.READ, ResourceType.TOPIC, topic)


def console_auth(listener_security: dict, credentials, authorizer, inter_broker: str | None = None) -> ConsoleAuth:
    """The console's rules from the broker's listeners (`BrokerConfig.listener_security()`); the
    TLS settings come from the inter-broker listener when it uses TLS, else the first TLS one."""
    from security import plain

    listeners = list(listener_security.values())
    tls_listeners = sorted((s for s in listeners if s.protocol.uses_tls), key=lambda s: s.name != inter_broker)
    tls = tls_listeners[0].ssl if tls_listeners else None
    if any(s.protocol.uses_sasl for s in listeners):
        users: dict[str, str] = {}
        for s in listeners:
            if s.protocol.uses_sasl:
                users.update(plain.plain_users(s.jaas.get("PLAIN", [])))
        return ConsoleAuth("basic", users, credentials, authorizer, replace(tls, client_auth="none") if tls else None)
    if tls is not None:
        rules = tls.principal_mapping_rules
        return ConsoleAuth("certificate", {}, credentials, authorizer, replace(tls, client_auth="required"), rules)
    return ConsoleAuth("open", {}, credentials, authorizer)
