"""Streaming queries for the Spark connector tests: a `minikafka` stream read with Trigger.AvailableNow
into a sink, run to its end (from any thread)."""


def minikafka_stream(spark, bootstrap: str, topic: str, columns: list[str], **options):
    """`spark.readStream.format("minikafka")` of `topic` from earliest, with `options`, selecting
    `columns` (SQL expressions)."""
    reader = spark.readStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in {"subscribe": topic, "startingOffsets": "earliest", **options}.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr(*columns)


def run_available_now(spark, stream, sink: str, checkpoint: str, timeout_s: float = 180, **sink_options):
    """Write `stream` to the `sink` format with Trigger.AvailableNow until it has read what was
    there; raises the query's exception; returns the query (its `recentProgress`)."""
    # Spark 4.3's DataStreamWriter.start finds Python data sources through the calling thread's
    # active session, which a thread other than the session's creator lacks (DATA_SOURCE_NOT_FOUND)
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    writer = stream.writeStream.format(sink).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    query = writer.start()
    query.awaitTermination(timeout_s)
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return query
