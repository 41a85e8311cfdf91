"""A `local_cluster.zk_fault_proxy` process for tests: a TCP proxy whose traffic a test silences
(`mode("drop")`), lets through (`mode("pass")`) or, for ZooKeeper, lets only handshakes through
(`mode("handshake")`)."""

from __future__ import annotations

import subprocess
import sys


class FaultProxyProcess:
    def __init__(self, target: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "local_cluster.zk_fault_proxy", "--target", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        assert line.startswith("listening on "), line
        self.port = int(line.split()[-1])

    def mode(self, mode: str) -> None:
        self.process.stdin.write(mode + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == f"ok {mode}"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
