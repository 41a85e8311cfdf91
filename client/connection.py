"""One connection to one broker: correlation ids, pipelining, ApiVersions negotiation.

`async with Connection.open(host, port) as conn:` connects, negotiates versions (ApiVersions v3,
falling back to the version the broker's v0 UNSUPPORTED_VERSION answer names, KIP-511), and runs a
reader task in its own nursery. `await conn.request(api_key, body)` may be called by many tasks at
once: requests are written whole and in order, responses are matched by correlation id. The version
used is the highest both sides serve. A broken connection fails every pending request with
`ConnectionClosed`; nothing is retried here (that is `Cluster`'s job).

Security (`security=ClientSecurity(...)`, Kafka's client keys via `security/config.py`): SSL and
SASL_SSL wrap the socket in TLS (checking the broker's certificate, and its host name unless
`ssl.endpoint.identification.algorithm` is empty); SASL_PLAINTEXT and SASL_SSL then authenticate
with SaslHandshake v1 + SaslAuthenticate (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) right after
ApiVersions. A refusal raises `AuthenticationFailed` (a `ConnectionClosed`) with the broker's message.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import ssl
from collections.abc import AsyncIterator

import trio

from protocol.api import SCHEMAS, decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, MalformedMessage, ProtocolError
from protocol.framing import FrameDecoder
from protocol.types import FieldDict
from security import plain
from security.config import PLAINTEXT_CLIENT, ClientSecurity, SecurityConfigError, SslSettings
from security.scram import ScramClient, ScramError
from security.ssl_context import client_context
from security.tls_read import drain_tls

log = logging.getLogger(__name__)


@contextlib.contextmanager
def unwrap_single():
    """Re-raise a lone exception that a nursery wrapped in an ExceptionGroup as itself, so callers
    of our context managers can catch `ConnectionClosed` & co. (the background tasks of these
    nurseries never raise; an error comes from the caller's own block)."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


class ConnectionClosed(Exception):
    """The connection broke (or could not be made) before the response arrived."""


class AuthenticationFailed(ConnectionClosed):
    """TLS or SASL refused the connection (a wrong password, an unknown user, a certificate the
    other side does not trust); the message says why."""


@functools.lru_cache(maxsize=16)
def _tls_context(settings: SslSettings) -> ssl.SSLContext:
    return client_context(settings)


class UnsupportedByBroker(Exception):
    """No version of the API is served by both sides."""


class _Pending:
    __slots__ = ("api_key", "version", "done", "result", "error", "correlation_id")

    def __init__(self, api_key: int, version: int, correlation_id: int):
        self.api_key, self.version, self.correlation_id = api_key, version, correlation_id
        self.done = trio.Event()
        self.result: FieldDict | None = None
        self.error: BaseException | None = None


class Connection:
    def __init__(self, stream: trio.abc.Stream, host: str, port: int, client_id: str):
        self.stream = stream
        self.host, self.port = host, port
        self.client_id = client_id
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._correlation = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._send_lock = trio.Lock()
        self._closed: BaseException | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "minikafka",
        connect_timeout_s: float = 10.0,
        security: ClientSecurity | None = None,
    ) -> AsyncIterator[Connection]:
        security = security or PLAINTEXT_CLIENT
        try:
            with trio.fail_after(connect_timeout_s):
                tcp = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as e:
            raise ConnectionClosed(f"cannot connect to {host}:{port}: {e or 'timed out'}") from None
        stream: trio.abc.Stream = tcp
        async with tcp:
            if security.protocol.uses_tls:
                stream = await _start_tls(tcp, host, port, security.ssl or SslSettings(), connect_timeout_s)
            conn = cls(stream, host, port, client_id)
            with unwrap_single():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn._read_loop)
                    try:
                        await conn._negotiate()
                        if security.protocol.uses_sasl:
                            await conn._authenticate(security)
                        yield conn
                    finally:
                        nursery.cancel_scope.cancel()

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate requests."""
        mechanism = security.sasl_mechanism
        where = f"{self.host}:{self.port}"
        response = await self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
        if response.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(
                f"{where} refused SASL mechanism {mechanism}: {ErrorCode(response.error_code).name} "
                f"(enabled: {', '.join(response.mechanisms or [])})"
            )
        user, password = security.username or "", security.password or ""

        async def step(token: bytes) -> bytes:
            r = await self.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            if r.error_code != ErrorCode.NONE:
                raise AuthenticationFailed(f"{where}: {ErrorCode(r.error_code).name}: {r.error_message}")
            return bytes(r.auth_bytes)

        if mechanism == "PLAIN":
            await step(plain.client_message(user, password))
            return
        try:
            scram = ScramClient(mechanism, user, password)
            server_first = await step(scram.first())
            scram.verify(await step(scram.final(server_first)))
        except ScramError as e:
            raise AuthenticationFailed(f"{where}: SCRAM exchange failed: {e}") from None

    async def _negotiate(self) -> None:
        """ApiVersions (allowed before SASL authentication, KIP-35)."""
        ours = SCHEMAS[ApiKey.API_VERSIONS].max_version
        response = await self.request(
            ApiKey.API_VERSIONS, {"client_software_name": "minikafka", "client_software_version": "0.1.0"}, version=ours
        )
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            theirs = next((k.max_version for k in response.api_keys if k.api_key == ApiKey.API_VERSIONS), 0)
            response = await self.request(ApiKey.API_VERSIONS, {}, version=min(ours, theirs))
        if response.error_code != ErrorCode.NONE:
            raise ConnectionClosed(
                f"ApiVersions failed on {self.host}:{self.port}: {ErrorCode(response.error_code).name}"
            )
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    @property
    def closed(self) -> bool:
        """The connection broke; requests on it fail at once."""
        return self._closed is not None

    def version_for(self, api_key: int) -> int:
        """The highest version both sides serve; raises UnsupportedByBroker."""
        ours = SCHEMAS[api_key]
        served = self.api_versions.get(api_key)
        if served is None or max(served[0], ours.min_version) > min(served[1], ours.max_version):
            raise UnsupportedByBroker(f"{self.host}:{self.port} serves no common version of {ours.name}")
        return min(served[1], ours.max_version)

    async def request(
        self, api_key: int, body: dict, *, version: int | None = None, timeout_s: float = 30.0
    ) -> FieldDict:
        """Send one request and wait for its response body. Raises ConnectionClosed,
        trio.TooSlowError, ProtocolError. (A request without a response, Produce with acks=0,
        goes through `send(..., expect_response=False)`.)"""
        pending = await self.send(api_key, body, version=version)
        assert pending is not None
        return await self.wait(pending, timeout_s)

    async def send(
        self, api_key: int, body: dict, *, version: int | None = None, expect_response: bool = True
    ) -> _Pending | None:
        """Write a request now and return a handle for `wait` (pipelining: requests go out in the
        order `send` is called, and the broker answers in that order)."""
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        version = self.version_for(api_key) if version is None else version
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, body, client_id=self.client_id)
        pending = _Pending(api_key, version, correlation_id)
        if expect_response:
            self._pending[correlation_id] = pending
        try:
            async with self._send_lock:
                await self.stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            self._pending.pop(correlation_id, None)
            self._fail(ConnectionClosed(f"{self.host}:{self.port}: {e}"))
            raise ConnectionClosed(f"{self.host}:{self.port}: {e}") from None
        return pending if expect_response else None

    async def wait(self, pending: _Pending, timeout_s: float = 30.0) -> FieldDict:
        """The response body of a request from `send`."""
        try:
            with trio.fail_after(timeout_s):
                await pending.done.wait()
        finally:
            self._pending.pop(pending.correlation_id, None)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(max_frame_size=1 << 30)
        try:
            stream = self.stream
            while data := await stream.receive_some(size := min(max(1 << 16, decoder.wanted), 4 << 20)):
                if isinstance(stream, trio.SSLStream):
                    data = drain_tls(stream, data, size)
                for frame in decoder.feed(data):
                    self._deliver(frame)
            self._fail(ConnectionClosed(f"{self.host}:{self.port} closed the connection"))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            self._fail(ConnectionClosed(f"{self.host}:{self.port}: {e}"))

    def _deliver(self, frame: bytes | bytearray) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        pending = self._pending.get(correlation_id)
        if pending is None:
            log.debug(
                "response to an abandoned request (correlation id %d) from %s:%d", correlation_id, self.host, self.port
            )
            return
        try:
            _, pending.result = decode_response(pending.api_key, pending.version, frame)
        except MalformedMessage as e:
            if pending.api_key == ApiKey.API_VERSIONS and pending.version > 0:
                try:  # KIP-511: a broker that does not know our version answers in v0
                    _, pending.result = decode_response(ApiKey.API_VERSIONS, 0, frame)
                except ProtocolError:
                    pending.error = e
            else:
                pending.error = e
        pending.done.set()

    def _fail(self, error: BaseException) -> None:
        self._closed = error
        for pending in list(self._pending.values()):
            pending.error = error
            pending.done.set()


async def _start_tls(tcp: trio.SocketStream, host: str, port: int, settings: SslSettings, timeout_s: float):
    try:
        context = _tls_context(settings)
    except SecurityConfigError as e:
        raise AuthenticationFailed(str(e)) from None
    tls = trio.SSLStream(tcp, context, server_hostname=host)
    try:
        with trio.fail_after(timeout_s):
            await tls.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, trio.TooSlowError) as e:
        raise AuthenticationFailed(
            f"TLS handshake with {host}:{port} failed: {e.__cause__ or e or 'timed out'}"
        ) from None
    return tls
