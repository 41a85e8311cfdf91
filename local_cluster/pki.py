"""A throwaway certificate authority for local secured clusters and tests (`trustme`, which builds
the certificates with `cryptography`): a CA, one broker certificate for the local host names, and
client certificates on demand. Files are PEM, as Kafka's `ssl.keystore.type=PEM` reads them.

Layout under `directory`: `ca.pem` (the truststore), `broker.pem` (the broker keystore: private
key then certificate chain), `client-<name>.pem` / `client-<name>.key` (a client certificate
whose subject is `CN=<name>,OU=clients,O=minikafka`, so its principal is
`User:CN=<name>,OU=clients,O=minikafka`), `client-<name>-keystore.pem` (both in one file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BROKER_HOSTS = ("localhost", "127.0.0.1", "::1")
ORGANIZATION = "minikafka"


@dataclass
class Pki:
    directory: Path
    _ca: object

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.directory / "broker.pem"

    def client_certificate(self, name: str) -> tuple[Path, Path]:
        """(certificate file, key file) for a client whose certificate names `name`."""
        cert_path, key_path = self.directory / f"client-{name}.pem", self.directory / f"client-{name}.key"
        if not cert_path.exists():
            leaf = self._ca.issue_cert(  # type: ignore[attr-defined]
                f"{name}.clients.minikafka",
                common_name=name,
                organization_name=ORGANIZATION,
                organization_unit_name="clients",
            )
            cert_path.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
            key_path.write_bytes(leaf.private_key_pem.bytes())
            key_path.chmod(0o600)
        return cert_path, key_path

    def client_keystore(self, name: str) -> Path:
        """A PEM keystore (key, then certificate chain) for Kafka's `ssl.keystore.location`."""
        cert, key = self.client_certificate(name)
        path = self.directory / f"client-{name}-keystore.pem"
        path.write_bytes(key.read_bytes() + cert.read_bytes())
        path.chmod(0o600)
        return path


def make_pki(directory: Path, hosts: tuple[str, ...] = BROKER_HOSTS) -> Pki:
    """A new CA and broker certificate (for `hosts`) written under `directory`."""
    import trustme

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name=ORGANIZATION, organization_unit_name="ca")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    broker = ca.issue_cert(
        *hosts, common_name="broker", organization_name=ORGANIZATION, organization_unit_name="brokers"
    )
    broker.private_key_and_cert_chain_pem.write_to_path(str(directory / "broker.pem"))
    (directory / "broker.pem").chmod(0o600)
    return Pki(directory, ca)
