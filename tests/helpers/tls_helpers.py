"""TLS contexts for in-process TLS pairs in unit tests: a fresh trustme CA, a server context
with a certificate for `broker`, and a client context that trusts the CA."""

import ssl

import trustme


def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context)."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("broker").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return server_ctx, client_ctx
