"""`minikafka users`: SCRAM credentials, like `kafka-configs.sh --entity-type users
--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'` and `--describe`:

    minikafka users --bootstrap-server B [--command-config F] --describe [--user U ...]
    minikafka users ... --add-scram --user U --mechanism SCRAM-SHA-256 --password P [--iterations N]
    minikafka users ... --delete-scram --user U --mechanism SCRAM-SHA-512

The password is salted here (a random 32-byte salt, PBKDF2 with the chosen iterations) and only
the salted form travels (AlterUserScramCredentials, key 51); `--describe` lists each user's
mechanisms and iterations (DescribeUserScramCredentials, key 50). A refused change prints Kafka's
error and exits 1.
"""

from __future__ import annotations

import argparse

from client.admin import upsert_scram_credential
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security.credentials import MECHANISM_IDS, MECHANISM_NUMBERS
from security.scram import MIN_ITERATIONS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list users' SCRAM mechanisms and iterations")
    action.add_argument("--add-scram", action="store_true", help="add or replace a user's SCRAM credential")
    action.add_argument("--delete-scram", action="store_true", help="delete a user's SCRAM credential")
    parser.add_argument("--user", action="append", default=[], help="the user (repeatable with --describe)")
    parser.add_argument("--mechanism", choices=sorted(MECHANISM_NUMBERS), default="SCRAM-SHA-256")
    parser.add_argument("--password", help="the new password (--add-scram)")
    parser.add_argument("--iterations", type=int, default=MIN_ITERATIONS, help="PBKDF2 iterations (4096-16384)")


async def _run(args) -> int:
    if (args.add_scram or args.delete_scram) and len(args.user) != 1:
        raise ValueError("--add-scram and --delete-scram take exactly one --user")
    if args.add_scram and not args.password:
        raise ValueError("--add-scram needs --password")
    async with open_cluster(args) as cluster:
        conn = await cluster.any_connection()
        if args.describe:
            body = {"users": [{"name": u} for u in args.user] if args.user else None}
            response = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
            status = 0
            for result in response.results:
                if result.error_code != ErrorCode.NONE:
                    print(f"{result.user}\t{ErrorCode(result.error_code).name}: {result.error_message}")
                    status = 1
                    continue
                infos = ", ".join(
                    f"{MECHANISM_IDS[i.mechanism]}(iterations={i.iterations})" for i in result.credential_infos
                )
                print(f"{result.user}\t{infos}")
            return status
        if args.add_scram:
            code, message = await upsert_scram_credential(
                cluster, args.user[0], args.mechanism, args.password, args.iterations
            )
        else:
            body = {
                "deletions": [{"name": args.user[0], "mechanism": MECHANISM_NUMBERS[args.mechanism]}],
                "upsertions": [],
            }
            result = (await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)).results[0]
            code, message = result.error_code, result.error_message
        if code != ErrorCode.NONE:
            print(f"{args.user[0]}: {ErrorCode(code).name}: {message}")
            return 1
        verb = "Added" if args.add_scram else "Deleted"
        print(f"{verb} {args.mechanism} credential of user {args.user[0]}")
        return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("users", _run, args)
    return status or result
