"""Writes an admin request makes to ZooKeeper's config tree (Kafka's `AdminZkClient`,
`changeTopicConfig` / `changeBrokerConfig`): the entity's whole config in
`/config/<type>/<name>` (`{"version":1,"config":{...}}`), then a sequential
`/config/changes/config_change_<seq>` naming it, which every broker's config change listener
(`broker.config_manager`) picks up and applies.
"""

from __future__ import annotations

from zk import znodes
from zk.client import NodeExistsError, NoNodeError, ZkClient


def entity_path(entity_type: str, name: str) -> str:
    """`entity_type`: "topics" or "brokers"; `name`: a topic, a broker id or "<default>"."""
    return f"/config/{entity_type}/{name}"


async def fetch_entity_config(zk: ZkClient, entity_type: str, name: str) -> dict[str, str]:
    """The stored config of an entity ({} when it has none, or its znode holds no data: a parent
    made on the way to a child, as /config/users/<u> for /config/users/<u>/clients/<c>)."""
    found = await zk.get_or_none(entity_path(entity_type, name))
    return {} if found is None or not found[0] else znodes.decode_topic_config(found[0])


async def change_entity_config(zk: ZkClient, entity_type: str, name: str, config: dict[str, str]) -> None:
    """Replace an entity's config and announce the change."""
    path = entity_path(entity_type, name)
    data = znodes.encode_topic_config(config)
    if await zk.exists(path) is None:
        try:
            await zk.create(path, data, makepath=True)
        except NodeExistsError:
            await zk.set(path, data)
    else:
        await zk.set(path, data)
    await zk.create(
        f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
        znodes.encode_config_change(entity_type, name),
        sequence=True,
        makepath=True,
    )


async def user_and_client_nodes(zk: ZkClient) -> list[tuple[str, str]]:
    """(entity type, name) of every user, user-and-client and client config znode, as change
    notifications name them: ("users", "<u>"), ("users", "<u>/clients/<c>"), ("clients", "<c>")."""

    async def children(path: str) -> list[str]:
        try:
            return await zk.get_children(path)
        except NoNodeError:
            return []

    nodes = []
    for user in await children(f"{znodes.CONFIG_USERS}"):
        nodes.append(("users", user))
        nodes += [
            ("users", f"{user}/clients/{client}") for client in await children(f"{znodes.CONFIG_USERS}/{user}/clients")
        ]
    nodes += [("clients", client) for client in await children("/config/clients")]
    return nodes
