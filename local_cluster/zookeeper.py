"""A standalone ZooKeeper process from Debian's `zookeeper` package (installed by `make setup`).

`ZooKeeperProcess.start(directory)` writes `zoo.cfg` and `log4j.properties` into `directory`,
starts `QuorumPeerMain` on 127.0.0.1 (an ephemeral port unless one is given), and returns once the
server answers `ruok` with `imok`. Settings follow ENVIRONMENT.md's measured recipe: tickTime 500 ms
so sessions down to 1 s are allowed, the admin server off, four-letter words on.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from local_cluster.brokers import die_with_parent as _die_with_parent  # the parameter below shadows the name
from local_cluster.ports import free_port

CLASSPATH = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"]


#: zoo.cfg lines that make every client log in with SASL (ZooKeeper 3.7+'s enforce.auth)
SASL_REQUIRED = (
    "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
    "enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n"
)
LOG4J_PROPERTIES = (
    "log4j.rootLogger=WARN, CONSOLE\nlog4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.CONSOLE.layout.ConversionPattern=%d %-5p [zookeeper] %c{1}: %m%n\n"
)


def server_jaas(users: dict[str, str]) -> str:
    """ZooKeeper's JAAS `Server` section accepting DIGEST-MD5 logins of `users` ({user: password})."""
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {entries};\n}};\n"


class ZooKeeperError(RuntimeError):
    pass


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command; '' when nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while data := s.recv(4096):
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class ZooKeeperProcess:
    directory: Path
    port: int
    process: subprocess.Popen

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        directory: Path,
        port: int = 0,
        timeout_s: float = 30.0,
        sasl_users: dict[str, str] | None = None,
        die_with_parent: bool = False,
    ) -> ZooKeeperProcess:
        """Start ZooKeeper on 127.0.0.1:`port` (0: a free one). With `sasl_users` ({user:
        password}) every client must log in with SASL DIGEST-MD5 as one of them: a client that
        has not cannot read or write anything (enforce.auth.enabled, ZooKeeper 3.7+).
        `die_with_parent`: SIGKILL when this process dies (`brokers.die_with_parent`)."""
        java = shutil.which("java")
        missing = [p for p in CLASSPATH if not Path(p).exists()]
        if java is None or missing:
            raise ZooKeeperError(f"ZooKeeper needs java and {', '.join(missing) or 'its jars'}: run `make setup`")
        directory.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        (directory / "data").mkdir(exist_ok=True)
        (directory / "zoo.cfg").write_text(
            f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={directory / 'data'}\n"
            f"clientPortAddress=127.0.0.1\nclientPort={port}\nadmin.enableServer=false\n"
            f"4lw.commands.whitelist=*\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            + (SASL_REQUIRED if sasl_users else "")
        )
        jaas = directory / "jaas.conf"
        if sasl_users:
            jaas.write_text(server_jaas(sasl_users))
            jaas.chmod(0o600)
        else:
            jaas.unlink(missing_ok=True)
        (directory / "log4j.properties").write_text(LOG4J_PROPERTIES)
        log_file = open(directory / "zookeeper.log", "ab")
        process = subprocess.Popen(
            [
                java,
                "-Xms32m",
                "-Xmx64m",
                "-XX:+UseSerialGC",
                f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}",
                *([f"-Djava.security.auth.login.config={jaas}"] if sasl_users else []),
                "-cp",
                ":".join(CLASSPATH),
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                str(directory / "zoo.cfg"),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
        log_file.close()
        zk = cls(directory, port, process)
        deadline = time.monotonic() + timeout_s
        while four_letter(port, "ruok") != "imok":
            if process.poll() is not None or time.monotonic() > deadline:
                zk.stop()
                tail = (directory / "zookeeper.log").read_text(errors="replace")[-2000:]
                raise ZooKeeperError(f"ZooKeeper on port {port} did not start:\n{tail}")
            time.sleep(0.1)
        return zk

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
