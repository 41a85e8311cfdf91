"""A standalone ZooKeeper process: Apache ZooKeeper's jars run by `java`.

The jars are looked for where each way of installing ZooKeeper puts them (`classpath()`):
`$ZOOKEEPER_HOME` (an unpacked Apache ZooKeeper binary tarball: `lib/*.jar`), Debian's
`zookeeper` package (`/usr/share/java`, what `make setup` installs) and Homebrew's
(`$(brew --prefix)/opt/zookeeper/libexec/lib`). When none is found, or no `java` is on the PATH,
`ZooKeeperError` says exactly what to install.

`ZooKeeperProcess.start(directory)` writes `zoo.cfg` and `log4j.properties` into `directory`,
starts `QuorumPeerMain` on 127.0.0.1 (an ephemeral port unless one is given), and returns once the
server answers `ruok` with `imok`. Settings follow ENVIRONMENT.md's measured recipe: tickTime 500 ms
so sessions down to 1 s are allowed, the admin server off, four-letter words on.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from local_cluster.brokers import die_with_parent as _die_with_parent  # the parameter below shadows the name
from local_cluster.ports import free_port

#: Debian's zookeeper package (with its log4j 1.2 binding)
DEBIAN_CLASSPATH = [
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
]
HOMEBREW_LIBS = ["/opt/homebrew/opt/zookeeper/libexec/lib", "/usr/local/opt/zookeeper/libexec/lib"]
INSTALL_HINT = (
    "install one of: Debian/Ubuntu `apt install zookeeper default-jre-headless`; macOS `brew install "
    "zookeeper`; or unpack Apache ZooKeeper's binary tarball (apache-zookeeper-3.8.x-bin.tar.gz) and set "
    "ZOOKEEPER_HOME to its directory. Or use a ZooKeeper you run: pytest --kafka-zookeeper HOST:PORT "
    "(or MINIKAFKA_ZOOKEEPER=HOST:PORT)"
)


def _jars_in(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.glob("*.jar"))


def classpath(environ: dict[str, str] | None = None) -> list[str]:
    """ZooKeeper's jars: `$ZOOKEEPER_HOME/lib` (and the jars beside it) when set, else Debian's,
    else Homebrew's. Raises ZooKeeperError naming what to install when none is there."""
    environ = os.environ if environ is None else environ
    home = environ.get("ZOOKEEPER_HOME")
    if home:
        jars = _jars_in(Path(home) / "lib") + _jars_in(Path(home))
        if not any(Path(j).name.startswith("zookeeper") for j in jars):
            raise ZooKeeperError(f"ZOOKEEPER_HOME={home} holds no zookeeper jar (in lib/ or beside it): {INSTALL_HINT}")
        return jars
    if all(Path(p).exists() for p in DEBIAN_CLASSPATH):
        return list(DEBIAN_CLASSPATH)
    for lib in HOMEBREW_LIBS:
        jars = _jars_in(Path(lib))
        if any(Path(j).name.startswith("zookeeper") for j in jars):
            return jars
    raise ZooKeeperError(f"ZooKeeper's jars were not found: {INSTALL_HINT}")


def java_command() -> str:
    """The `java` to run ZooKeeper with (`$JAVA_HOME/bin/java`, else the PATH's). Raises ZooKeeperError."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(
            "ZooKeeper needs a Java runtime and no `java` was found: install one "
            "(Debian/Ubuntu `apt install default-jre-headless`, macOS `brew install openjdk`) or set JAVA_HOME"
        )
    return java


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
        jars = classpath()
        java = java_command()
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
                ":".join(jars),
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
