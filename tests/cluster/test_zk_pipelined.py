"""zk/client.py's pipelined calls against a real ZooKeeper: get_many and fenced_write_many report
each item's own outcome, in order, and a failed fence or version writes nothing; delete_many skips
znodes already gone and raises any other failure."""

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from zk.client import Stat, ZkClient


async def test_get_many_and_fenced_write_many(zk_connect, zk):
    client = ZkClient(zk_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    await client.start()
    try:
        zk.create("/fence", b"1")
        for name in ("a", "b", "c"):
            zk.create(f"/{name}", b"0")
        got = await client.get_many(["/a", "/missing", "/c"])
        assert got[0][0] == b"0" and isinstance(got[0][1], Stat) and got[1] is None and got[2][0] == b"0"
        assert await client.get_many([]) == []
        results = await client.fenced_write_many(
            "/fence",
            0,
            [
                [("set", "/a", b"1", 0)],  # applies
                [("set", "/b", b"1", 7)],  # wrong version: nothing written
                [("create", "/d", b"new")],  # applies
                [("create", "/c", b"dup")],  # exists: nothing written
            ],
        )
        assert results[0][0].version == 1 and results[2] == ["/d"]
        assert isinstance(results[1], BadVersionError) and type(results[3]).__name__ == "NodeExistsError"
        assert (zk.get("/a")[0], zk.get("/b")[0], zk.get("/d")[0], zk.get("/c")[0]) == (b"1", b"0", b"new", b"0")
        zk.set("/fence", b"2")  # the fence moves on: every write is refused
        stale = await client.fenced_write_many("/fence", 0, [[("set", "/a", b"2", 1)], [("create", "/e", b"")]])
        assert all(isinstance(r, BadVersionError) for r in stale)
        assert zk.get("/a")[0] == b"1" and zk.exists("/e") is None
        try:
            await client.fenced_write("/fence", 0, [("set", "/a", b"3", 1)])
            raise AssertionError("a stale fence must raise")
        except BadVersionError:
            pass
        try:
            await client.get("/missing")
            raise AssertionError("expected NoNodeError")
        except NoNodeError:
            pass
        zk.create("/parent/child", b"", makepath=True)
        await client.delete_many(["/a", "/missing", "/d"])  # one already gone: skipped
        assert zk.exists("/a") is None and zk.exists("/d") is None
        try:
            await client.delete_many(["/b", "/parent", "/c"])
            raise AssertionError("a znode with children must not be deleted quietly")
        except NotEmptyError:
            pass
        assert zk.exists("/b") is None and zk.exists("/c") is None and zk.exists("/parent/child") is not None
        await client.delete_many([])
    finally:
        await client.close()
