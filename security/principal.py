"""Who a connection is (Kafka's `KafkaPrincipal` as `DefaultKafkaPrincipalBuilder` builds it).

- PLAINTEXT, and SSL without a client certificate: `User:ANONYMOUS`.
- SASL (either transport): `User:<authenticated user name>`.
- SSL with a client certificate: `User:<name>`, where name is the certificate subject as an
  RFC 2253 distinguished name (most specific first, e.g. `CN=alice,OU=eng,O=acme`) mapped by
  `ssl.principal.mapping.rules`: `DEFAULT` keeps it, `RULE:<regex>/<replacement>/[LU]` rules
  (Kafka's `SslPrincipalMapper`) rewrite the first match, `/L` or `/U` changes its case.
"""

from __future__ import annotations

import re

ANONYMOUS = "User:ANONYMOUS"

_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def user(name: str) -> str:
    return f"User:{name}"


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject) -> str:
    """RFC 2253 form of `ssl.SSLSocket.getpeercert()['subject']` (a tuple of RDNs, each a tuple
    of (attribute, value) pairs, most general first)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


class PrincipalMappingError(ValueError):
    pass


def _parse_rules(text: str) -> list[tuple[re.Pattern, str, str] | None]:
    rules: list[tuple[re.Pattern, str, str] | None] = []
    for item in re.split(r",\s*(?=RULE:|DEFAULT)", text.strip()):
        item = item.strip()
        if not item:
            continue
        if item == "DEFAULT":
            rules.append(None)
            continue
        m = re.fullmatch(r"RULE:(.*?[^\\])/(.*?)/([LU]?)", item)
        if not m:
            raise PrincipalMappingError(f"invalid ssl.principal.mapping.rules entry {item!r}")
        rules.append((re.compile(m.group(1)), m.group(2), m.group(3)))
    return rules or [None]


def map_distinguished_name(dn: str, rules_text: str = "DEFAULT") -> str:
    """Apply Kafka's `ssl.principal.mapping.rules` to `dn`: the first rule whose regex matches the
    whole name wins; `DEFAULT` returns it unchanged; no match is an error (as in Kafka)."""
    for rule in _parse_rules(rules_text):
        if rule is None:
            return dn
        pattern, replacement, case = rule
        if pattern.fullmatch(dn):
            result = pattern.sub(re.sub(r"\$(\d)", r"\\\1", replacement), dn, count=1)
            return result.lower() if case == "L" else result.upper() if case == "U" else result
    raise PrincipalMappingError(f"no rule of ssl.principal.mapping.rules matches {dn!r}")


def from_certificate(cert: dict | None, rules_text: str = "DEFAULT") -> str:
    """The principal of a TLS peer: ANONYMOUS without a certificate."""
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    return user(map_distinguished_name(distinguished_name(cert["subject"]), rules_text))
