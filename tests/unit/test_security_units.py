"""The pure parts of TLS / SASL: listener settings from Kafka's keys, principals from
certificates, the server-side SASL state machine, the SASL phase over fed frames, and SCRAM
credential administration (no sockets)."""

from __future__ import annotations

import struct

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import sasl_phase
from protocol.api import decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security import plain
from security.authenticator import IllegalSaslState, SaslAuthenticationFailed, SaslServerAuthenticator
from security.config import (
    SecurityConfigError,
    SecurityProtocol,
    client_security,
    inter_broker_client,
    inter_broker_listener_name,
    listener_security,
)
from security.credentials import CredentialCache, alter_credentials, describe_credentials
from security.principal import ANONYMOUS, PrincipalMappingError, distinguished_name, from_certificate
from security.scram import ScramClient, make_credential, salted_password

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_listener_protocols_come_from_the_map_and_default_to_their_names():
    props = {
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS,
    }
    found = listener_security(props, ["INTERNAL", "EXTERNAL"])
    assert found["INTERNAL"].protocol == SecurityProtocol.SASL_PLAINTEXT
    assert found["EXTERNAL"].protocol == SecurityProtocol.PLAINTEXT
    assert plain.plain_users(found["INTERNAL"].jaas["PLAIN"]) == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(SecurityConfigError, match="needs ssl.keystore"):
        listener_security({}, ["SSL"])
    with pytest.raises(SecurityConfigError, match="no entry in listener.security.protocol.map"):
        listener_security({}, ["CONTROLLER"])
    with pytest.raises(SecurityConfigError, match="GSSAPI not supported"):
        listener_security({}, ["SASL_PLAINTEXT"])  # Kafka's default mechanism is not served


def test_the_inter_broker_listener_and_its_credentials():
    names = ["PLAINTEXT", "SASL_SSL"]
    assert inter_broker_listener_name({}, names, None) == "PLAINTEXT"
    assert inter_broker_listener_name({"security.inter.broker.protocol": "SASL_SSL"}, names, None) == "SASL_SSL"
    assert inter_broker_listener_name({"inter.broker.listener.name": "sasl_ssl"}, names, None) == "SASL_SSL"
    with pytest.raises(SecurityConfigError, match="only one of"):
        inter_broker_listener_name(
            {"inter.broker.listener.name": "SASL_SSL", "security.inter.broker.protocol": "PLAINTEXT"}, names, None
        )
    props = {
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": JAAS,
    }
    listener = listener_security(props, ["INTERNAL"])["INTERNAL"]
    client = inter_broker_client(props, listener)
    assert (client.protocol, client.sasl_mechanism, client.username, client.password) == (
        SecurityProtocol.SASL_PLAINTEXT,
        "PLAIN",
        "admin",
        "admin-secret",
    )
    with pytest.raises(SecurityConfigError, match="not enabled"):
        inter_broker_client({**props, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}, listener)


def test_client_properties_in_kafka_and_librdkafka_spellings():
    java = client_security(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";',
            "ssl.truststore.location": "/ca.pem",
        }
    )
    assert (java.sasl_mechanism, java.username, java.password, java.ssl.truststore_location) == (
        "SCRAM-SHA-512",
        "u",
        "p",
        "/ca.pem",
    )
    rdkafka = client_security(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca.pem",
        }
    )
    assert (rdkafka.protocol, rdkafka.ssl.truststore_location) == (SecurityProtocol.SASL_SSL, "/ca.pem")
    with pytest.raises(SecurityConfigError, match="security.protocol"):
        client_security({"security.protocol": "TLS"})
    with pytest.raises(SecurityConfigError, match="needs sasl.jaas.config"):
        client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"})


def test_certificate_principals_follow_rfc_2253_and_the_mapping_rules():
    subject = ((("countryName", "US"),), (("organizationName", "acme, inc"),), (("commonName", "alice"),))
    assert distinguished_name(subject) == "CN=alice,O=acme\\, inc,C=US"
    assert from_certificate({"subject": subject}) == "User:CN=alice,O=acme\\, inc,C=US"
    assert from_certificate({"subject": subject}, "RULE:^CN=(.*?),.*$/$1/U") == "User:ALICE"
    assert from_certificate({"subject": subject}, "RULE:^OU=x.*$/y/, DEFAULT").startswith("User:CN=alice")
    assert from_certificate(None) == ANONYMOUS == from_certificate({})
    with pytest.raises(PrincipalMappingError):
        from_certificate({"subject": subject}, "RULE:^OU=x.*$/y/")


def _authenticator(cache: CredentialCache | None = None) -> SaslServerAuthenticator:
    cache = cache or CredentialCache()
    return SaslServerAuthenticator(("PLAIN", "SCRAM-SHA-256"), lambda: {"alice": "alice-secret"}, cache.get)


def test_plain_and_scram_exchanges_and_their_failures():
    auth = _authenticator()
    assert auth.handshake("GSSAPI") == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert auth.handshake("PLAIN") == ErrorCode.NONE
    assert auth.handshake("PLAIN") == ErrorCode.ILLEGAL_SASL_STATE
    assert auth.authenticate(plain.client_message("alice", "alice-secret")) == b"" and auth.principal == "User:alice"
    with pytest.raises(IllegalSaslState):
        auth.authenticate(b"again")
    bad = _authenticator()
    bad.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        bad.authenticate(plain.client_message("alice", "wrong"))
    cache = CredentialCache()
    cache.update_user("bob", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "bob-secret").to_text()})
    scram = _authenticator(cache)
    assert scram.handshake("SCRAM-SHA-256") == ErrorCode.NONE
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    client.verify(scram.authenticate(client.final(scram.authenticate(client.first()))))
    assert scram.principal == "User:bob"
    wrong = _authenticator(cache)
    wrong.handshake("SCRAM-SHA-256")
    impostor = ScramClient("SCRAM-SHA-256", "bob", "guess")
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        wrong.authenticate(impostor.final(wrong.authenticate(impostor.first())))


def _frame(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    return encode_request(api_key, version, correlation_id, body, size_prefix=False)


async def _run_phase(frames: list, auth: SaslServerAuthenticator):
    sent: list[bytes] = []
    queue = list(frames)

    async def next_frame():
        return queue.pop(0) if queue else None

    async def send(parts):
        sent.append(b"".join(bytes(p) for p in parts))

    async def api_versions(frame):
        return [b"versions"]

    principal = await sasl_phase.authenticate(next_frame, send, auth, api_versions, "peer")
    return principal, sent, queue


def _response(api_key: int, version: int, wire: bytes):
    return decode_response(api_key, version, wire[4:])[1]


def test_the_sasl_phase_serves_versions_handshake_and_tokens_then_hands_over():
    frames = [
        _frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}),
        _frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
        _frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain.client_message("alice", "alice-secret")}),
        b"the first real request",
    ]
    principal, sent, left = trio.run(_run_phase, frames, _authenticator())
    assert principal == "User:alice" and left == [b"the first real request"]
    assert sent[0] == b"versions"
    assert _response(ApiKey.SASL_HANDSHAKE, 1, sent[1]).error_code == ErrorCode.NONE
    assert _response(ApiKey.SASL_AUTHENTICATE, 2, sent[2]).error_code == ErrorCode.NONE


def test_the_sasl_phase_closes_on_failures_and_anything_out_of_order():
    wrong = [
        _frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
        _frame(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": plain.client_message("alice", "nope")}),
    ]
    principal, sent, _ = trio.run(_run_phase, wrong, _authenticator())
    reply = _response(ApiKey.SASL_AUTHENTICATE, 1, sent[1])
    assert principal is None and reply.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert reply.error_message == "Authentication failed: Invalid username or password"
    unsupported = [_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})]
    principal, sent, _ = trio.run(_run_phase, unsupported, _authenticator())
    reply = _response(ApiKey.SASL_HANDSHAKE, 1, sent[0])
    assert principal is None and reply.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert reply.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    for early in (_frame(ApiKey.METADATA, 9, {"topics": None}), b"\x00", b"\xff" * 600000):
        principal, sent, _ = trio.run(_run_phase, [early], _authenticator())
        assert principal is None and sent == []
    # a v0 handshake: raw tokens, no Kafka headers
    raw = [_frame(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}), plain.client_message("alice", "alice-secret")]
    principal, sent, _ = trio.run(_run_phase, raw, _authenticator())
    assert principal == "User:alice" and sent[1] == struct.pack(">i", 0)


def test_scram_credential_alterations_validate_per_user():
    salt = b"s" * 16
    salted = salted_password("SCRAM-SHA-256", "pw", salt, 4096)
    results, updated = alter_credentials(
        [("ghost", 1)],
        [
            ("bob", 1, 4096, salt, salted),
            ("eve", 3, 4096, salt, salted),
            ("tim", 1, 100, salt, salted),
            ("", 1, 4096, salt, salted),
        ],
        {},
    )
    assert results["bob"] == (ErrorCode.NONE, None)
    assert results["ghost"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert results["eve"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert results["tim"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert set(updated) == {"bob"} and describe_credentials(updated["bob"]) == [(1, 4096)]
    twice, none = alter_credentials([("bob", 1)], [("bob", 1, 4096, salt, salted)], {"bob": updated["bob"]})
    assert twice["bob"][0] == ErrorCode.DUPLICATE_RESOURCE and none == {}
    deleted, written = alter_credentials([("bob", 1)], [], {"bob": {**updated["bob"], "producer_byte_rate": "10"}})
    assert deleted["bob"][0] == ErrorCode.NONE and written == {"bob": {"producer_byte_rate": "10"}}
    cache = CredentialCache()
    cache.update_user("bob", updated["bob"])
    assert cache.get("SCRAM-SHA-256", "bob").iterations == 4096 and cache.get("SCRAM-SHA-512", "bob") is None


_TOKENS = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"n,,n=bob,r=abc", b"c=biws,r=x,p=AAAA", b"\0alice\0", b"\0\0", b"n,,", b"p=tls-unique,,n=a,r=b"]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=80),  # garbage frames
            st.builds(
                lambda m, v: _frame(ApiKey.SASL_HANDSHAKE, v, {"mechanism": m}),
                st.sampled_from(["PLAIN", "SCRAM-SHA-256", "GSSAPI", ""]),
                st.integers(0, 1),
            ),
            st.builds(lambda t, v: _frame(ApiKey.SASL_AUTHENTICATE, v, {"auth_bytes": t}), _TOKENS, st.integers(0, 2)),
            st.builds(
                lambda f, n: f[:n],
                st.just(_frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})),
                st.integers(0, 12),
            ),  # truncated
            _TOKENS,  # raw tokens (after a v0 handshake)
        ),
        max_size=6,
    )
)
def test_fuzzed_sasl_exchanges_end_cleanly(frames):
    """Whatever a client sends during the exchange, the phase returns (a principal only for valid
    credentials) and never raises: the server then closes the connection or serves it."""
    cache = CredentialCache()
    cache.update_user("bob", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "bob-secret").to_text()})
    principal, _, _ = trio.run(_run_phase, frames, _authenticator(cache))
    assert principal is None or principal in ("User:alice", "User:bob")
