"""The docker pause nemesis falls back to SIGSTOP when runc's freezer fails, and the heal undoes
whichever was done. The Docker commands are recorded, not run: what is tested is our choice of them."""

import pytest
import trio
from trio.testing import MockClock

from chaos.docker_runner import FREEZE_ATTEMPTS, Faults, _freeze, _thaw
from local_cluster.compose import DockerError

FREEZE_FAILED = (
    "Error response from daemon: Cannot pause container x: OCI runtime pause failed: unable to freeze: unknown"
)


class RecordingCluster:
    """`docker()` as ComposeCluster's, failing the first `pause_failures` pauses with `error`."""

    def __init__(self, pause_failures: int, error: str = FREEZE_FAILED) -> None:
        self.pause_failures = pause_failures
        self.error = error
        self.calls: list[tuple[str, ...]] = []

    def docker(self, verb: str, service: str, *args: str) -> None:
        self.calls.append((verb, *args, service))
        if verb == "pause" and self.pause_failures:
            self.pause_failures -= 1
            raise DockerError(f"docker pause {service} exited 1:\n{self.error}")


def faults() -> Faults:
    return Faults(set(), set(), {})


def test_a_working_freezer_is_used_and_unpaused() -> None:
    cluster, f = RecordingCluster(pause_failures=1), faults()
    how = trio.run(_freeze, cluster, f, "broker2")
    assert how == "docker pause"
    assert f.paused == {"broker2"} and not f.sigstopped
    trio.run(_thaw, cluster, f, "broker2")
    assert cluster.calls == [("pause", "broker2"), ("pause", "broker2"), ("unpause", "broker2")]
    assert not f.paused


def test_a_failing_freezer_falls_back_to_sigstop_and_the_thaw_sends_sigcont() -> None:
    cluster, f = RecordingCluster(pause_failures=FREEZE_ATTEMPTS), faults()
    how = trio.run(_freeze, cluster, f, "broker1", clock=MockClock(autojump_threshold=0))
    assert how.startswith("SIGSTOP")
    assert f.sigstopped == {"broker1"} and not f.paused
    assert cluster.calls[-1] == ("kill", "--signal", "STOP", "broker1")
    trio.run(_thaw, cluster, f, "broker1")
    assert cluster.calls[-1] == ("kill", "--signal", "CONT", "broker1")
    assert not f.sigstopped


def test_other_docker_errors_are_not_hidden() -> None:
    cluster = RecordingCluster(pause_failures=1, error="No such container: x")
    with pytest.raises(DockerError, match="No such container"):
        trio.run(_freeze, cluster, faults(), "broker3")
    assert cluster.calls == [("pause", "broker3")]
