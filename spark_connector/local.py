"""A local SparkSession with the `minikafka` data source registered, as this project runs Spark
(the main job, the tests, the benches): `local[2]` on 127.0.0.1 only, no UI, the executors'
Python the one running this process."""

from __future__ import annotations

import os
import sys


def local_session(app_name: str, shuffle_partitions: int = 4, quiet: bool = False):
    """The session (SparkSession.builder...getOrCreate) with MinikafkaDataSource registered;
    `quiet`: Spark logs errors only and shows no progress bar."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_connector import MinikafkaDataSource

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    )
    if quiet:
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MinikafkaDataSource)
    return spark
