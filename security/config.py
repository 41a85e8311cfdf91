"""Per-listener security settings from Kafka's broker keys (Kafka's `KafkaConfig` /
`ListenerName` / `SslConfigs` / `BrokerSecurityConfigs`), parsed without I/O.

- `listener.security.protocol.map` (`NAME:PROTOCOL,...`) gives each listener its protocol:
  PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Kafka's default maps each protocol name to itself,
  so a listener named after a protocol needs no entry.
- The inter-broker listener: `inter.broker.listener.name`, else the listener whose protocol is
  `security.inter.broker.protocol` (default PLAINTEXT); setting both is an error, as in Kafka.
- Every `ssl.*` / `sasl.*` key may be given per listener as `listener.name.<name>.<key>` (name in
  lower case), which wins over the plain key. A mechanism's JAAS config is
  `listener.name.<name>.<mechanism>.sasl.jaas.config` (mechanism in lower case), else
  `sasl.jaas.config`.

Errors raise `SecurityConfigError` naming the key.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from security.jaas import InvalidJaasConfig, LoginModule, parse_jaas_config

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityConfigError(ValueError):
    """An invalid or inconsistent security setting; the message names the key."""


class SecurityProtocol(enum.IntEnum):
    """Kafka's `SecurityProtocol` ids (as sent in UpdateMetadata endpoints)."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


def parse_protocol(text: str, key: str = "security.protocol") -> SecurityProtocol:
    try:
        return SecurityProtocol[text.strip().upper()]
    except KeyError:
        names = ", ".join(p.name for p in SecurityProtocol)
        raise SecurityConfigError(f"invalid value {text!r} for {key}: must be one of {names}") from None


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...`."""
    out: dict[str, SecurityProtocol] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise SecurityConfigError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        out[name.strip().upper()] = parse_protocol(protocol, "listener.security.protocol.map")
    return out


DEFAULT_PROTOCOL_MAP = {p.name: p for p in SecurityProtocol}


@dataclass(frozen=True)
class SslSettings:
    """A side's TLS settings (Kafka's `ssl.*` keys; PEM stores only). Paths are as given."""

    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    endpoint_identification_algorithm: str = "https"
    principal_mapping_rules: str = "DEFAULT"
    certificate_location: str | None = None  # librdkafka's separate certificate / key files
    key_location: str | None = None


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener requires of its clients."""

    name: str
    protocol: SecurityProtocol
    ssl: SslSettings | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    jaas: dict[str, list[LoginModule]] = field(default_factory=dict)  # mechanism -> login modules


@dataclass(frozen=True)
class ClientSecurity:
    """How a client (the CLI, or a broker talking to another) connects: protocol, TLS settings,
    and for SASL the mechanism and credentials."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ssl: SslSettings | None = None
    sasl_mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = None


PLAINTEXT_CLIENT = ClientSecurity()


class _Lookup:
    """Kafka's listener-prefixed key lookup over raw properties."""

    def __init__(self, props: dict[str, str], listener: str | None):
        self.props = props
        self.prefix = f"listener.name.{listener.lower()}." if listener else None

    def get(self, key: str, default: str | None = None) -> str | None:
        if self.prefix is not None and self.prefix + key in self.props:
            return self.props[self.prefix + key]
        return self.props.get(key, default)


_CLIENT_AUTH = ("none", "requested", "required")
_PROTOCOLS = ("TLSv1.2", "TLSv1.3")


def ssl_settings(props: dict[str, str], listener: str | None = None) -> SslSettings:
    """The `ssl.*` keys for `listener` (None: the plain keys, as a client's properties give them)."""
    get = _Lookup(props, listener).get
    keystore_type = (get("ssl.keystore.type", "PEM") or "PEM").upper()
    truststore_type = (get("ssl.truststore.type", "PEM") or "PEM").upper()
    for key, value, has_store in (
        ("ssl.keystore.type", keystore_type, get("ssl.keystore.location") or get("ssl.keystore.key")),
        ("ssl.truststore.type", truststore_type, get("ssl.truststore.location") or get("ssl.truststore.certificates")),
    ):
        if value != "PEM" and has_store:
            raise SecurityConfigError(f"{key}={value} is not supported: only PEM stores are (KIP-651)")
    client_auth = (get("ssl.client.auth", "none") or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise SecurityConfigError(
            f"invalid value {client_auth!r} for ssl.client.auth: must be none, requested or required"
        )
    protocols = tuple(
        p.strip() for p in (get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3") or "").split(",") if p.strip()
    )
    bad = [p for p in protocols if p not in _PROTOCOLS]
    if bad or not protocols:
        raise SecurityConfigError(
            f"invalid value for ssl.enabled.protocols: {bad or 'empty'} (TLSv1.2 and TLSv1.3 are)"
        )
    if get("ssl.keystore.key") and not get("ssl.keystore.certificate.chain"):
        raise SecurityConfigError("ssl.keystore.key needs ssl.keystore.certificate.chain")
    return SslSettings(
        keystore_type=keystore_type,
        keystore_location=get("ssl.keystore.location"),
        keystore_certificate_chain=get("ssl.keystore.certificate.chain"),
        keystore_key=get("ssl.keystore.key"),
        key_password=get("ssl.key.password") or get("ssl.keystore.password"),
        truststore_type=truststore_type,
        truststore_location=get("ssl.truststore.location") or get("ssl.ca.location"),
        truststore_certificates=get("ssl.truststore.certificates"),
        client_auth=client_auth,
        enabled_protocols=protocols,
        endpoint_identification_algorithm=(get("ssl.endpoint.identification.algorithm", "https") or "").strip(),
        principal_mapping_rules=get("ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT",
        certificate_location=get("ssl.certificate.location"),
        key_location=get("ssl.key.location"),
    )


def _jaas(props: dict[str, str], listener: str | None, mechanism: str) -> list[LoginModule]:
    lookup = _Lookup(props, None)
    keys = [f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"] if listener else []
    keys.append("sasl.jaas.config")
    for key in keys:
        text = lookup.get(key)
        if text:
            try:
                return parse_jaas_config(text)
            except InvalidJaasConfig as e:
                raise SecurityConfigError(f"invalid value for {key}: {e}") from None
    return []


def _mechanisms(text: str, key: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in text.split(",") if m.strip())


def listener_security(props: dict[str, str], listener_names: list[str]) -> dict[str, ListenerSecurity]:
    """Each listener's security, validated: a TLS listener needs a keystore; a SASL listener needs
    at least one supported mechanism enabled (Kafka's default, GSSAPI, is not served)."""
    protocol_map = dict(DEFAULT_PROTOCOL_MAP)
    if props.get("listener.security.protocol.map"):
        protocol_map = parse_protocol_map(props["listener.security.protocol.map"])
    out = {}
    for name in listener_names:
        protocol = protocol_map.get(name)
        if protocol is None:
            raise SecurityConfigError(
                f"listener {name} has no entry in listener.security.protocol.map ({', '.join(protocol_map)})"
            )
        get = _Lookup(props, name).get
        ssl = None
        if protocol.uses_tls:
            ssl = ssl_settings(props, name)
            if not (ssl.keystore_location or ssl.keystore_certificate_chain):
                raise SecurityConfigError(
                    f"listener {name} ({protocol.name}) needs ssl.keystore.location or ssl.keystore.certificate.chain"
                )
        mechanisms: tuple[str, ...] = ()
        jaas = {}
        if protocol.uses_sasl:
            mechanisms = _mechanisms(get("sasl.enabled.mechanisms", "GSSAPI") or "", "sasl.enabled.mechanisms")
            unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
            if unsupported:
                raise SecurityConfigError(
                    f"sasl.enabled.mechanisms for listener {name}: {', '.join(unsupported)} not supported "
                    f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
                )
            if not mechanisms:
                raise SecurityConfigError(f"sasl.enabled.mechanisms for listener {name} is empty")
            jaas = {m: _jaas(props, name, m) for m in mechanisms}
        out[name] = ListenerSecurity(name, protocol, ssl, mechanisms, jaas)
    return out


def inter_broker_listener_name(props: dict[str, str], listener_names: list[str], control_plane: str | None) -> str:
    """Kafka's rule: `inter.broker.listener.name`, else the listener named after
    `security.inter.broker.protocol` (default PLAINTEXT); without either key, the first listener
    that is not the control plane's (this project's earlier behaviour, kept for configs that name
    their only listener freely)."""
    name = (props.get("inter.broker.listener.name") or "").strip().upper()
    protocol = (props.get("security.inter.broker.protocol") or "").strip().upper()
    if name and protocol:
        raise SecurityConfigError(
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"
        )
    if protocol:
        parse_protocol(protocol, "security.inter.broker.protocol")
        name = protocol
    if name:
        if name not in listener_names:
            raise SecurityConfigError(f"inter.broker.listener.name {name} is not one of the listeners {listener_names}")
        if name == control_plane:
            raise SecurityConfigError("the inter-broker listener cannot be the control plane listener")
        return name
    return next(n for n in listener_names if n != control_plane)


def inter_broker_client(props: dict[str, str], listener: ListenerSecurity) -> ClientSecurity:
    """How this broker connects to the others' `listener`: its protocol, the listener's TLS
    settings (its truststore verifies the peer, its keystore is offered), and for SASL
    `sasl.mechanism.inter.broker.protocol` with the `username` / `password` options of that
    mechanism's JAAS config."""
    if not listener.protocol.uses_sasl:
        return ClientSecurity(listener.protocol, listener.ssl)
    mechanism = (props.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
    if mechanism not in listener.sasl_mechanisms:
        raise SecurityConfigError(
            f"sasl.mechanism.inter.broker.protocol {mechanism} is not enabled on the inter-broker listener "
            f"{listener.name} ({', '.join(listener.sasl_mechanisms)})"
        )
    options = next((m.options for m in listener.jaas.get(mechanism, []) if "username" in m.options), None)
    if options is None or "password" not in options:
        raise SecurityConfigError(
            f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config needs username and password "
            "for inter-broker connections"
        )
    return ClientSecurity(listener.protocol, listener.ssl, mechanism, options["username"], options["password"])


def client_security(props: dict[str, str]) -> ClientSecurity:
    """A client's settings from Kafka's client keys (`--command-config` files, librdkafka-style
    keys too): `security.protocol`, `sasl.mechanism` (or `sasl.mechanisms`), `sasl.jaas.config` or
    `sasl.username` / `sasl.password`, `ssl.truststore.location` or `ssl.ca.location`, and the
    keystore keys or `ssl.certificate.location` / `ssl.key.location` for a client certificate."""
    protocol = parse_protocol(props.get("security.protocol", "PLAINTEXT"))
    ssl = ssl_settings(props) if protocol.uses_tls else None
    if not protocol.uses_sasl:
        return ClientSecurity(protocol, ssl)
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism {mechanism} is not supported ({', '.join(SUPPORTED_MECHANISMS)})")
    user, password = props.get("sasl.username"), props.get("sasl.password")
    if props.get("sasl.jaas.config"):
        try:
            modules = parse_jaas_config(props["sasl.jaas.config"])
        except InvalidJaasConfig as e:
            raise SecurityConfigError(f"invalid value for sasl.jaas.config: {e}") from None
        options = modules[0].options if modules else {}
        user, password = options.get("username", user), options.get("password", password)
    if user is None or password is None:
        raise SecurityConfigError("SASL needs sasl.jaas.config (username, password) or sasl.username and sasl.password")
    return ClientSecurity(protocol, ssl, mechanism, user, password)
