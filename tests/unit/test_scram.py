"""SCRAM (RFC 5802 / 7677) as Kafka uses it: RFC 7677's SCRAM-SHA-256 test vector, both sides
against each other for both mechanisms, Kafka's credential text, and every refusal."""

import base64
import hashlib
import hmac

import pytest

from security.scram import (
    MIN_ITERATIONS,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    escape_name,
    make_credential,
)

RFC7677 = {
    "salt": base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
    "client_nonce": "rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def test_rfc7677_vector_both_sides():
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, salt=RFC7677["salt"])
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, nonce=RFC7677["server_nonce"])
    assert server.first(RFC7677["client_first"]) == RFC7677["server_first"]
    assert server.final(RFC7677["client_final"]) == RFC7677["server_final"]
    assert server.user == "user"
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["client_nonce"])
    assert client.first() == RFC7677["client_first"]
    assert client.final(RFC7677["server_first"]) == RFC7677["client_final"]
    client.verify(RFC7677["server_final"])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_and_a_wrong_password_fails(mechanism):
    credential = make_credential(mechanism, "s3cret", 4096)
    users = {"al,i=ce": credential}.get
    client, server = ScramClient(mechanism, "al,i=ce", "s3cret"), ScramServer(mechanism, users)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.user == "al,i=ce"
    wrong, server = ScramClient(mechanism, "al,i=ce", "guess"), ScramServer(mechanism, users)
    with pytest.raises(ScramError, match="invalid credentials with SASL mechanism"):
        server.final(wrong.final(server.first(wrong.first())))


def test_credential_text_round_trips_in_kafkas_form():
    credential = make_credential("SCRAM-SHA-512", "x", MIN_ITERATIONS)
    text = credential.to_text()
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential
    with pytest.raises(ScramError):
        ScramCredential.from_text("salt=AA==,iterations=4096")


@pytest.mark.parametrize(
    "first",
    [
        b"",  # empty
        b"\xff\xfe",  # not UTF-8
        b"n,,r=abc",  # no user
        b"n,,n=user",  # no nonce
        b"p=tls-unique,,n=user,r=abc",  # channel binding
        b"n,,n=us=er,r=abc",  # a bad saslname escape
        b"x" * 100_000,  # oversize garbage
        b"y,,n=user,r=abc",  # "client supports channel binding": Kafka accepts only "n"
        b"n,,n=user,r=abc,1=x",  # an extension that is not letters=value
        b"n,,n=user,r=abc,zz",  # an attribute without a value
        b"n,,x=1,n=user,r=abc",  # an unknown attribute before the user name
        b"n,a=other,n=user,r=abc",  # an authorization id other than the user
        "n,,n=üser,r=abc".encode(),  # not ASCII
    ],
)
def test_malformed_client_first_is_refused(first):
    server = ScramServer("SCRAM-SHA-256", {"user": make_credential("SCRAM-SHA-256", "p")}.get)
    with pytest.raises(ScramError):
        server.first(first)


def test_unknown_user_wrong_nonce_and_out_of_order_are_refused():
    users = {"user": make_credential("SCRAM-SHA-256", "p")}.get
    with pytest.raises(ScramError, match="invalid credentials"):
        ScramServer("SCRAM-SHA-256", users).first(b"n,,n=nobody,r=abc")
    server = ScramServer("SCRAM-SHA-256", users)
    with pytest.raises(ScramError, match="before the client-first"):
        server.final(b"c=biws,r=abc,p=AAAA")
    server.first(b"n,,n=user,r=abc")
    with pytest.raises(ScramError, match="nonce"):
        server.final(b"c=biws,r=someone-else,p=AAAA")
    with pytest.raises(ScramError):
        server.final(b"c=biws,r=abc" + b",p=!!notbase64")
    for final in (b"c=biws,x=1,r=abc,p=AAAA", b"c=bi,r=abc,p=AAAA", b"c=biws,r=abc,p=AAAA,q=1"):
        with pytest.raises(ScramError, match="format"):  # unknown attributes, bad base64, trailing data
            server.final(final)
    # extensions (letters=value) and an authorization id equal to the user are accepted, as in Kafka
    assert ScramServer("SCRAM-SHA-256", users).first(b"n,a=user,n=user,r=abc,tokenauth=true").startswith(b"r=abc")
    with pytest.raises(ScramError):
        make_credential("SCRAM-SHA-256", "p", 100)
    with pytest.raises(ScramError):
        make_credential("SCRAM-SHA-1", "p")
    assert escape_name("a,b=c") == "a=2Cb=3Dc"


def _old_librdkafka_final(password: str, client_first_bare: str, server_first: bytes, client_nonce: str) -> bytes:
    """The client-final message of librdkafka < 2.6.1 (SCRAM-SHA-256), written independently of
    security/scram.py: its nonce is the client nonce followed by the whole server nonce."""
    attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    without_proof = f"c=biws,r={client_nonce}{attrs['r']}"
    auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_a_nonce_ending_with_ours_is_accepted_as_kafka_3_does():
    """librdkafka < 2.6.1 (Debian's kcat) repeats its nonce in front; Kafka 3.x checks endsWith."""
    users = {"user": make_credential("SCRAM-SHA-256", "pencil")}.get
    server = ScramServer("SCRAM-SHA-256", users)
    server_first = server.first(b"n,,n=user,r=clientnonce")
    assert server.final(_old_librdkafka_final("pencil", "n=user,r=clientnonce", server_first, "clientnonce"))
    server = ScramServer("SCRAM-SHA-256", users)
    server_first = server.first(b"n,,n=user,r=clientnonce")
    nonce = server_first.decode().split(",")[0][2:]
    with pytest.raises(ScramError, match="nonce"):  # the server's part missing: refused
        server.final(f"c=biws,r={nonce[:-1]},p=AAAA".encode())
