import subprocess

import pytest
from controller_stub import assign

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes


async def test_kcat_metadata_produce_consume(start_broker):
    broker = start_broker(1)
    await assign([broker], {"t": [[1], [1]]})
    meta = subprocess.run(["kcat", "-L", "-b", broker.bootstrap, "-m", "10"], capture_output=True, text=True)
    print(meta.stdout, meta.stderr)
    assert "broker 1 at 127.0.0.1" in meta.stdout and "partition 1, leader 1" in meta.stdout
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    p = subprocess.run(
        ["kcat", "-P", "-b", broker.bootstrap, "-t", "t", "-p", "0", "-K", ":"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 0, p.stderr
    c = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "t", "-p", "0", "-o", "beginning", "-e", "-f", "%k=%s\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    print(c.stdout, c.stderr)
    assert c.stdout.split() == [f"k{i}=v{i}" for i in range(10)]
