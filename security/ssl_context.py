"""`ssl.SSLContext`s from Kafka's PEM settings (KIP-651), for listeners and for clients.

- Keystore: `ssl.keystore.location` is one PEM file holding the private key and the certificate
  chain; or `ssl.keystore.certificate.chain` + `ssl.keystore.key` hold the PEM text itself; or
  (librdkafka's keys) `ssl.certificate.location` + `ssl.key.location` name two files. An
  encrypted key takes `ssl.key.password`.
- Truststore: `ssl.truststore.location` (PEM file of CA certificates) or
  `ssl.truststore.certificates` (PEM text). Without one a client uses the system's CAs and a
  listener accepts no client certificate.
- `ssl.enabled.protocols` bounds the TLS versions (1.2 and 1.3); `ssl.client.auth` none /
  requested / required maps to CERT_NONE / CERT_OPTIONAL / CERT_REQUIRED;
  `ssl.endpoint.identification.algorithm` = https (Kafka's default) checks the server's host name,
  empty turns the check off.

Reading the files is the only I/O; errors raise `SecurityConfigError` naming the setting.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from security.config import SecurityConfigError, SslSettings

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _versions(context: ssl.SSLContext, settings: SslSettings) -> None:
    versions = sorted(_VERSIONS[p] for p in settings.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> None:
    password = settings.key_password or None
    try:
        if settings.certificate_location:
            context.load_cert_chain(settings.certificate_location, settings.key_location, password)
        elif settings.keystore_location:
            context.load_cert_chain(settings.keystore_location, None, password)
        elif settings.keystore_certificate_chain:
            # the ssl module loads chains from files only: a private temporary file, removed at once
            fd, path = tempfile.mkstemp(suffix=".pem")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write((settings.keystore_key or "").strip() + "\n" + settings.keystore_certificate_chain.strip())
                context.load_cert_chain(path, None, password)
            finally:
                os.unlink(path)
    except (OSError, ssl.SSLError) as e:
        raise SecurityConfigError(f"cannot load the keystore (ssl.keystore.*): {e}") from None


def _load_truststore(context: ssl.SSLContext, settings: SslSettings) -> bool:
    try:
        if settings.truststore_location:
            context.load_verify_locations(cafile=settings.truststore_location)
        elif settings.truststore_certificates:
            context.load_verify_locations(cadata=settings.truststore_certificates)
        else:
            return False
    except (OSError, ssl.SSLError) as e:
        raise SecurityConfigError(f"cannot load the truststore (ssl.truststore.*): {e}") from None
    return True


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The context of a TLS listener (SSL or SASL_SSL)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    _load_keystore(context, settings)
    has_truststore = _load_truststore(context, settings)
    if settings.client_auth != "none" and not has_truststore:
        raise SecurityConfigError(f"ssl.client.auth={settings.client_auth} needs a truststore (ssl.truststore.*)")
    context.verify_mode = _VERIFY[settings.client_auth]
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """The context a client (or a broker connecting to another) uses."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    if not _load_truststore(context, settings):
        context.load_default_certs()
    if settings.keystore_location or settings.keystore_certificate_chain or settings.certificate_location:
        _load_keystore(context, settings)
    context.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context
