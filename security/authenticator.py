"""One connection's SASL exchange on the broker side (Kafka's `SaslServerAuthenticator`), pure:
the server shell feeds it the mechanism from SaslHandshake (key 17) and each token from
SaslAuthenticate (key 36) or, after a v0 handshake, from raw size-prefixed frames.

States: the handshake names a mechanism (`handshake`, once), then `authenticate` takes tokens
until the mechanism is done (`complete`, `principal` set) or fails (`SaslAuthenticationFailed`
with Kafka's message, answered SASL_AUTHENTICATION_FAILED, after which the connection closes).
PLAIN is one token; SCRAM-SHA-256/512 are two (client-first, client-final).
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ErrorCode, KafkaError
from security import plain, principal
from security.scram import ScramCredential, ScramError, ScramServer


class SaslAuthenticationFailed(KafkaError):
    """Answered SASL_AUTHENTICATION_FAILED with `str(self)` as the error message."""

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED


class IllegalSaslState(KafkaError):
    """A request out of order (answered ILLEGAL_SASL_STATE; the connection closes)."""

    error_code = ErrorCode.ILLEGAL_SASL_STATE


class SaslServerAuthenticator:
    def __init__(
        self,
        mechanisms: tuple[str, ...],
        plain_users: Callable[[], dict[str, str]],
        scram_credential: Callable[[str, str], ScramCredential | None],
    ):
        """`mechanisms`: `sasl.enabled.mechanisms` of the listener; `plain_users()` the PLAIN
        users of its JAAS config; `scram_credential(mechanism, user)` the stored credential."""
        self.mechanisms = mechanisms
        self._plain_users = plain_users
        self._scram_credential = scram_credential
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None
        self._steps = 0

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> ErrorCode:
        """SaslHandshake: NONE, or UNSUPPORTED_SASL_MECHANISM (the connection then closes), or
        ILLEGAL_SASL_STATE for a second handshake."""
        if self.mechanism is not None:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        if mechanism.startswith("SCRAM-"):
            self._scram = ScramServer(mechanism, lambda name: self._scram_credential(mechanism, name))
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> bytes:
        """One client token in, the server's token out. Raises SaslAuthenticationFailed or
        IllegalSaslState."""
        if self.mechanism is None or self.complete:
            raise IllegalSaslState("SaslAuthenticate outside a SASL exchange")
        self._steps += 1
        if self.mechanism == "PLAIN":
            try:
                self.principal = principal.user(plain.authenticate(token, self._plain_users()))
            except plain.PlainError as e:
                raise SaslAuthenticationFailed(str(e)) from None
            return b""
        assert self._scram is not None
        try:
            if self._steps == 1:
                return self._scram.first(token)
            reply = self._scram.final(token)
        except ScramError as e:
            raise SaslAuthenticationFailed(str(e)) from None
        assert self._scram.user is not None
        self.principal = principal.user(self._scram.user)
        return reply
