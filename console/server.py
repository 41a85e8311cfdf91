"""The console's trio shell: routes a GET to its page, checks who asks (`console.auth`), and
gathers the other brokers' snapshots from their consoles (`/api/local.json`) for each page.

Routes: `/` cluster, `/topics`, `/topics/<topic>`, `/groups`, `/groups/<id>`, `/transactions`,
`/clients` (connected clients and their pushed metrics, KIP-714),
`/records/<topic>/<partition>?offset=N&limit=M` (committed records, read from a broker holding a
replica: this one, or the leader's console), `/api/local.json` (this broker's snapshot),
`/api/records.json?topic=&partition=&offset=&limit=` (a local replica's records).

Peers are the brokers registered in ZooKeeper with a console URL (`BrokerRegistration.console_url`);
each is asked with a 2 s deadline, concurrently, and a broker that does not answer is named on
the page. Answers: (status, content type, body bytes); a handler never raises on a request.
A topic, group or topic partition that does not exist is 404 Not Found (the page says so); a
query parameter that should be a number and is not (`?offset=abc`) is 400 Bad Request.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from console import clients, pages
from console.auth import ConsoleAuth
from console.view import ClusterView

log = logging.getLogger(__name__)

PEER_TIMEOUT_S = 2.0
MAX_PEER_ANSWER = 64 << 20
HTML = "text/html; charset=utf-8"
JSON = "application/json"
Answer = tuple[str, str, bytes]


@dataclass
class Console:
    """`snapshot()`: this broker's `console.snapshot.local_snapshot`; `records(topic, partition,
    offset, limit)`: `console.snapshot.read_records` on this broker; `peers()`: {broker id:
    console URL} of the registered brokers; `peer_authorization`: the Authorization header this
    broker sends to the others (its inter-broker SASL login), or None."""

    broker_id: int
    snapshot: Callable[[], dict]
    records: Callable[[str, int, int, int], dict]
    peers: Callable[[], Awaitable[dict[int, str]]]
    auth: ConsoleAuth
    peer_authorization: str | None = None
    peer_tls: ssl.SSLContext | None = None  # for https:// peers: the inter-broker client's TLS context

    async def handle(
        self, target: str, authorization: str | None, host: str, tls: bool = False, certificate: dict | None = None
    ) -> Answer:
        """One GET: `authorization` its header, `host` the peer's address, `tls` whether it came
        over TLS, `certificate` the client's (TLS with a certificate)."""
        try:
            return await self._handle(target, authorization, host, tls, certificate)
        except Exception as e:  # a page must never take the broker down; say what broke
            log.exception("console request %s failed", target)
            return "500 Internal Server Error", "text/plain; charset=utf-8", f"console error: {e}\n".encode()

    async def _handle(
        self, target: str, authorization: str | None, host: str, tls: bool, certificate: dict | None
    ) -> Answer:
        if self.auth.tls is not None and not tls:
            return _text("403 Forbidden", "This cluster's listeners use TLS: open the console with https://.\n")
        principal = self.auth.principal(authorization, certificate)
        if principal is None:
            return "401 Unauthorized", "text/plain; charset=utf-8", b"log in with a SASL user of this cluster\n"
        if not self.auth.may_view(principal, host):
            return _text("403 Forbidden", f"{principal} may not DESCRIBE the cluster\n")
        url = urllib.parse.urlsplit(target)
        path = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        try:
            return await self._route(path, query, principal, host)
        except BadQuery as e:
            return _text("400 Bad Request", f"{e}\n")

    async def _route(self, path: list[str], query: dict[str, str], principal, host: str) -> Answer:
        """The answer for a path: 404 for a page, topic, group or partition that does not exist.
        Raises BadQuery (400) for a query parameter that is not a number where one is needed."""
        if path == ["api", "local.json"]:
            return "200 OK", JSON, json.dumps(self.snapshot()).encode()
        if path == ["api", "records.json"]:
            topic, partition = query.get("topic", ""), _number(query, "partition", 0)
            if not self.auth.may_read(principal, host, topic):
                return _text("403 Forbidden", f"{principal} may not READ topic {topic}\n")
            return "200 OK", JSON, json.dumps(self.records(topic, partition, *_window(query))).encode()
        peers = await self.peers()
        view = await self.view(peers)
        if path == []:
            return _html(pages.cluster(view))
        if path == ["topics"]:
            return _html(pages.topics(view))
        if len(path) == 2 and path[0] == "topics":
            found = path[1] in view.topics()
            return _html(pages.topic(view, path[1]), "200 OK" if found else "404 Not Found")
        if path == ["groups"]:
            return _html(pages.groups(view))
        if len(path) == 2 and path[0] == "groups":
            found = view.group(path[1]) is not None
            return _html(pages.group(view, path[1]), "200 OK" if found else "404 Not Found")
        if path == ["transactions"]:
            return _html(pages.transactions(view))
        if path == ["clients"]:
            return _html(clients.page(view))
        if len(path) == 3 and path[0] == "records" and path[2].isdigit():
            topic, partition = path[1], int(path[2])
            if not self.auth.may_read(principal, host, topic):
                return _text("403 Forbidden", f"{principal} may not READ topic {topic}\n")
            offset, limit = _window(query)
            if view.partition(topic, partition) is None:
                return _html(
                    pages.page(f"Records of {topic}-{partition}", "<p>No such topic partition.</p>", view),
                    "404 Not Found",
                )
            answer = await self._records(view, peers, topic, partition, offset, limit)
            return _html(pages.records(view, topic, partition, answer, offset, limit))
        return "404 Not Found", HTML, pages.page("Not found", "<p>No such page.</p>", view).encode()

    async def view(self, peers: dict[int, str]) -> ClusterView:
        """Every reachable broker's snapshot (`peers`: {broker id: console URL}), this one's read
        directly; the view is made once all are in."""
        own = self.snapshot()
        snapshots, unreachable = {self.broker_id: own}, {}

        async def ask(broker_id: int, url: str) -> None:
            try:
                snapshots[broker_id] = json.loads(await self.get(url + "/api/local.json"))
            except trio.TooSlowError:
                unreachable[broker_id] = f"no answer in {PEER_TIMEOUT_S:.0f} s"
            except (OSError, ValueError, ssl.SSLError, trio.BrokenResourceError) as e:
                unreachable[broker_id] = str(e) or type(e).__name__

        async with trio.open_nursery() as nursery:
            for broker_id, url in peers.items():
                if broker_id != self.broker_id:
                    nursery.start_soon(ask, broker_id, url)
        for b in own["brokers"]:  # registered in the metadata but without a console URL in ZooKeeper
            if b["id"] not in snapshots and b["id"] not in unreachable:
                unreachable[b["id"]] = "no console registered"
        return ClusterView(self.broker_id, snapshots, unreachable)

    async def _records(
        self, view: ClusterView, peers: dict[int, str], topic: str, partition: int, offset: int, limit: int
    ) -> dict:
        """From the leader, whose high watermark says what is committed (this broker's own
        replica when it leads, or when the leader's console does not answer)."""
        state = view.partition(topic, partition)
        if state is None or state["leader"] == self.broker_id:
            return self.records(topic, partition, offset, limit)
        url = peers.get(state["leader"])
        query = urllib.parse.urlencode({"topic": topic, "partition": partition, "offset": offset, "limit": limit})
        try:
            if url is None:
                raise OSError("no console registered")
            return json.loads(await self.get(f"{url}/api/records.json?{query}"))
        except (OSError, ValueError, ssl.SSLError, trio.TooSlowError, trio.BrokenResourceError) as e:
            local = self.records(topic, partition, offset, limit)
            why = f"the leader, broker {state['leader']}, did not answer ({e})"
            return (
                {**local, "note": f"{why}: this broker's replica, up to its own high watermark"}
                if "error" not in local
                else {"error": why}
            )

    async def get(self, url: str) -> bytes:
        """An HTTP/1.0 GET of another broker's console; the body of a 200, else OSError."""
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        head = f"GET {target} HTTP/1.0\r\nHost: {parts.netloc}\r\n"
        if self.peer_authorization:
            head += f"Authorization: {self.peer_authorization}\r\n"
        with trio.fail_after(PEER_TIMEOUT_S):
            stream: trio.abc.Stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
            if parts.scheme == "https":
                if self.peer_tls is None:
                    raise OSError("an https console, but this broker has no TLS client settings")
                stream = trio.SSLStream(stream, self.peer_tls, server_hostname=parts.hostname)
            async with stream:
                await stream.send_all((head + "\r\n").encode())
                chunks, size = [], 0
                while chunk := await stream.receive_some(65536):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_PEER_ANSWER:
                        raise OSError("answer too large")
        response = b"".join(chunks)
        status_line, _, rest = response.partition(b"\r\n")
        _, _, body = rest.partition(b"\r\n\r\n")
        if b" 200 " not in status_line + b" ":
            raise OSError(status_line.decode(errors="replace"))
        return body


class BadQuery(ValueError):
    """A query parameter the console cannot use: answered 400 Bad Request."""


def _number(query: dict, key: str, default: int) -> int:
    """A query parameter as a number >= 0, `default` when absent; raises BadQuery otherwise."""
    value = query.get(key)
    if value is None:
        return default
    if not value.isdigit():
        raise BadQuery(f"{key}={value}: expected a number >= 0")
    return int(value)


def _window(query: dict) -> tuple[int, int]:
    """(offset, limit) of a records request: offset 0 and 50 records unless given, 1-500 records."""
    return _number(query, "offset", 0), min(max(_number(query, "limit", 50), 1), 500)


def _html(body: str, status: str = "200 OK") -> Answer:
    return status, HTML, body.encode()


def _text(status: str, message: str) -> Answer:
    return status, "text/plain; charset=utf-8", message.encode()
