"""SCRAM credential admin per mechanism (KIP-554), judged by confluent-kafka's and kafka-python's
AdminClients: each mechanism's credential is kept, replaced and deleted on its own in
`/config/users/<user>`, and DescribeUserScramCredentials for every user (librdkafka sends an empty
list, kafka-python null; Kafka's `describingAllUsers` takes both) lists what is left. Names that
cannot be one znode (`..`, `.`) get the API's error and reach no ZooKeeper call."""

import pytest
from admin_helpers import raw

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow
TIMEOUT = 30


def _confluent_all(admin) -> dict[str, list[tuple[str, int]]]:
    described = admin.describe_user_scram_credentials().result(TIMEOUT)
    return {
        user: sorted((str(i.mechanism).rsplit(".", 1)[-1], i.iterations) for i in d.scram_credential_infos)
        for user, d in described.items()
    }


def test_confluent_upserts_and_deletes_each_mechanism_on_its_own(start_broker):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    broker = start_broker(1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(*alterations) -> None:
        for f in admin.alter_user_scram_credentials(list(alterations)).values():
            f.result(TIMEOUT)

    alter(UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"a"))
    assert _confluent_all(admin) == {"alice": [("SCRAM_SHA_256", 4096)]}
    alter(UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"b"))
    assert _confluent_all(admin) == {"alice": [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)]}
    alter(UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512))
    assert _confluent_all(admin) == {"alice": [("SCRAM_SHA_256", 4096)]}
    named = admin.describe_user_scram_credentials(["alice"])["alice"].result(TIMEOUT)
    assert [i.iterations for i in named.scram_credential_infos] == [4096]
    alter(UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256))
    assert _confluent_all(admin) == {}


def test_kafka_python_upserts_and_deletes_each_mechanism_on_its_own(start_broker):
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    broker = start_broker(1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def everyone() -> dict:
        return {
            u: sorted((i["mechanism"].name, i["iterations"]) for i in d["credential_infos"])
            for u, d in admin.describe_user_scram_credentials().items()
        }

    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", sha256, "x", iterations=4096)]) == {
        "bob": None
    }
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", sha512, "y", iterations=8192)])
    assert everyone() == {"bob": [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)]}
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", sha512)])
    assert everyone() == {"bob": [("SCRAM_SHA_256", 4096)]}
    admin.close()


def test_names_that_cannot_be_a_znode_get_the_apis_error(start_broker):
    broker = start_broker(1)
    for user in ("..", "."):
        altered = raw(
            broker,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            {
                "deletions": [],
                "upsertions": [
                    {"name": user, "mechanism": 1, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}
                ],
            },
        )
        assert [(r.user, r.error_code) for r in altered.results] == [(user, ErrorCode.UNACCEPTABLE_CREDENTIAL)]
        described = raw(broker, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": [{"name": user}]})
        assert described.results[0].error_code == ErrorCode.RESOURCE_NOT_FOUND
        quota = raw(
            broker,
            ApiKey.ALTER_CLIENT_QUOTAS,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": user}],
                        "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert quota.entries[0].error_code == ErrorCode.INVALID_REQUEST
    # the broker is still whole: a good name works on the same broker afterwards
    ok = raw(
        broker,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {
            "deletions": [],
            "upsertions": [
                {"name": "dot.ted", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}
            ],
        },
    )
    assert ok.results[0].error_code == ErrorCode.NONE
