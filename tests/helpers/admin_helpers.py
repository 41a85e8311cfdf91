"""Helpers for the admin API tests on real clusters, called from plain (non-trio) test functions:
one raw request to a broker, and waiting for a condition."""

import time

import trio

from client.connection import Connection


def raw(broker, api_key, body, version=None):
    """One request to `broker` over a fresh connection; returns the decoded response body."""

    async def go():
        async with Connection.open(broker.host, broker.port) as conn:
            return await conn.request(api_key, body, version=version)

    return trio.run(go)


def wait(predicate, what, timeout_s=90):
    """Poll `predicate` until true; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
