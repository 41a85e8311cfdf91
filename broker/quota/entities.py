"""Where quota entities live in ZooKeeper (Kafka's ZooKeeper layout, `ConfigEntityName` and
`Sanitizer`): a user's quotas in `/config/users/<user>`, a client id's in `/config/clients/<id>`,
both in `/config/users/<user>/clients/<id>`; `<default>` names the default of either. Names are
url-encoded in znode names. Change notifications name `users/<user>`, `clients/<id>` or
`users/<user>/clients/<id>`.
"""

from __future__ import annotations

import urllib.parse

from broker.quota.manager import DEFAULT, Entity
from protocol.entity_names import is_node_name

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"


def sanitize(name: str) -> str:
    """A user or client id as a znode name; `<default>` stays as it is."""
    return name if name == DEFAULT else urllib.parse.quote(name, safe="")


def desanitize(node: str) -> str:
    return node if node == DEFAULT else urllib.parse.unquote(node)


def from_change(entity_type: str, name: str) -> Entity | None:
    """The entity a config change notification names; None for other entity types."""
    if entity_type == "clients":
        return None, desanitize(name)
    if entity_type != "users":
        return None
    user, sep, rest = name.partition("/clients/")
    return desanitize(user), (desanitize(rest) if sep else None)


def config_path(entity: Entity) -> tuple[str, str]:
    """(entity type, name) for `zk.admin` writes of an entity's config."""
    user, client_id = entity
    if user is not None and client_id is not None:
        return "users", f"{sanitize(user)}/clients/{sanitize(client_id)}"
    if user is not None:
        return "users", sanitize(user)
    if client_id is not None:
        return "clients", sanitize(client_id)
    raise ValueError("an entity names a user, a client id, or both")


def from_components(components: list[tuple[str, str | None]]) -> Entity:
    """An AlterClientQuotas / DescribeClientQuotas entity ([(entity type, name or None for the
    default)]) as (user, client id). Raises ValueError: an unknown or repeated entity type, IP
    entities (not supported here), no component, or a name that cannot be a znode ("", ".", "..")."""
    user: str | None = None
    client_id: str | None = None
    seen = set()
    for entity_type, name in components:
        if entity_type in seen:
            raise ValueError(f"Duplicate {entity_type} entity type")
        seen.add(entity_type)
        value = DEFAULT if name is None else name
        if not is_node_name(sanitize(value)):  # "", "." and ".." would not name one znode
            raise ValueError(f"Invalid {entity_type} name {value!r}")
        if entity_type == USER:
            user = value
        elif entity_type == CLIENT_ID:
            client_id = value
        elif entity_type == IP:
            raise ValueError("IP quotas are not supported")
        else:
            raise ValueError(f"Unexpected entity type {entity_type}")
    if not seen:
        raise ValueError("Invalid empty client quota entity")
    return user, client_id


def to_components(entity: Entity) -> list[dict]:
    """The response's entity data (names None for the default)."""
    out = []
    for entity_type, value in ((USER, entity[0]), (CLIENT_ID, entity[1])):
        if value is not None:
            out.append({"entity_type": entity_type, "entity_name": None if value == DEFAULT else value})
    return out
