"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them for SASL (KIP-84): the
stored credential, its ZooKeeper text form, and both sides of the exchange as pure state machines
(bytes in, bytes out; no sockets).

Credential text (Kafka's `ScramCredentialUtils`, the value stored per mechanism in
`/config/users/<user>`): `salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`.
Kafka refuses fewer than 4096 iterations and more than 16384 (`ScramMechanism.minIterations` and
AlterUserScramCredentials' limit).

Exchange (RFC 5802 section 3): client-first `n,,n=<user>,r=<client nonce>` (Kafka also accepts the
`tokenauth=true` extension, which is not served here) -> server-first `r=<nonce>,s=<salt>,i=<n>`
-> client-final `c=biws,r=<nonce>,p=<proof>` -> server-final `v=<server signature>`. Any failure
raises `ScramError` with the message Kafka sends (SASL_AUTHENTICATION_FAILED).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class ScramError(Exception):
    """A failed or malformed exchange (answered SASL_AUTHENTICATION_FAILED)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError(f"invalid base64: {text[:40]!r}") from None


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps for a user and mechanism; never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse Kafka's text form; raises ScramError."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                _unb64(fields["salt"]),
                _unb64(fields["stored_key"]),
                _unb64(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ScramError(f"invalid SCRAM credential: {e}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, MECHANISMS[mechanism]).digest()


def _h(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(MECHANISMS[mechanism], data).digest()


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential (random 32-byte salt unless given). Raises ScramError for an unknown
    mechanism or an iteration count outside Kafka's limits."""
    if mechanism not in MECHANISMS:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a salted password (what AlterUserScramCredentials carries: the
    client salts, the broker never sees the password)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _h(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def password_matches(mechanism: str, password: str, credential: ScramCredential) -> bool:
    """Whether `password` is the one `credential` was made from (its stored key, recomputed;
    compared in constant time). For HTTP Basic logins to the web console."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    return hmac.compare_digest(
        credential_from_salted(mechanism, salted, credential.salt, credential.iterations).stored_key,
        credential.stored_key,
    )


# RFC 5802's grammar as Kafka's ScramMessages matches it (ASCII only; gs2 header "n" only: no
# channel binding, "y" and "p=" refused; extensions are letters=value and are ignored).
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_BASE64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS})"
)
CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM message: {message[:80]!r}")
        out[part[0]] = part[2:]
    return out


def _unescape_name(name: str) -> str:
    """RFC 5802 saslname: ',' and '=' arrive as '=2C' and '=3D'; any other '=' is an error."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i : i + 3]
            if code not in ("=2C", "=3D"):
                raise ScramError(f"invalid user name encoding in {name!r}")
            out.append("," if code == "=2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramServer:
    """The server side of one exchange: `first(client_first) -> server_first` once the caller
    gave `credential_for(user)`, then `final(client_final) -> server_final`."""

    def __init__(self, mechanism: str, credential_for, nonce: str | None = None):
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self.credential_for = credential_for  # user -> ScramCredential | None
        self._server_nonce = nonce or _b64(os.urandom(18))
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = self._server_first = self._nonce = ""

    def first(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("the client-first message is not UTF-8") from None
        match = CLIENT_FIRST.fullmatch(text)
        if match is None:
            if text.startswith(("p=", "y,")):
                raise ScramError("channel binding is not supported")
            raise ScramError("Invalid SCRAM client first message format")
        bare = match["bare"]
        attrs = {"n": match["saslname"], "r": match["nonce"]}
        if match["authzid"] is not None and _unescape_name(match["authzid"]) != _unescape_name(attrs["n"]):
            raise ScramError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.user = _unescape_name(attrs["n"])
        self._credential = self.credential_for(self.user)
        if self._credential is None:
            raise ScramError(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(self._credential.salt)},i={self._credential.iterations}"
        return self._server_first.encode("ascii")

    def final(self, message: bytes) -> bytes:
        if self._credential is None:
            raise ScramError("the client-final message came before the client-first message")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("the client-final message is not UTF-8") from None
        match = CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise ScramError("Invalid SCRAM client final message format")
        without_proof, proof_part = match["without_proof"], match["proof"]
        attrs = {"r": match["nonce"], "c": match["channel"]}
        # The nonce must end with the one we sent: Kafka 3.x's ScramSaslServer (endsWith since 3.8.1,
        # CVE-2024-56128) accepts librdkafka < 2.6.1, which puts its own nonce in front once more
        # (Debian's kcat links such a librdkafka); Kafka 4 demands equality and refuses those clients.
        if not attrs["r"].endswith(self._nonce):
            raise ScramError("invalid SCRAM client-final message (nonce or channel binding)")
        proof = _unb64(proof_part)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        m, credential = self.mechanism, self._credential
        client_signature = _hmac(m, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("invalid client proof length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(_h(m, client_key), credential.stored_key):
            raise ScramError(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
            )
        return f"v={_b64(_hmac(m, credential.server_key, auth_message))}".encode("ascii")


class ScramClient:
    """The client side (our CLI and inter-broker connections): `first() -> client_first`,
    `final(server_first) -> client_final`, `verify(server_final)` (raises ScramError)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None):
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported SCRAM mechanism {mechanism}")
        self.mechanism, self.password = mechanism, password
        self._client_first_bare = f"n={escape_name(user)},r={nonce or _b64(os.urandom(18))}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attrs = _attributes(text)
        nonce = attrs.get("r", "")
        if not nonce.startswith(_attributes(self._client_first_bare)["r"]):
            raise ScramError("the server's nonce does not extend ours")
        iterations = int(attrs.get("i", "0"))
        if iterations < MIN_ITERATIONS:
            raise ScramError(f"too few iterations: {iterations}")
        m = self.mechanism
        salted = salted_password(m, self.password, _unb64(attrs.get("s", "")), iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = _hmac(m, salted, b"Client Key")
        client_signature = _hmac(m, _h(m, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        self._server_signature = _hmac(m, _hmac(m, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8"))
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
            raise ScramError("the server's signature is wrong")
