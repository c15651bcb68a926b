"""The SparkSession the `streams spark` jobs run in, with the `streams_oplog` source registered.

Why these settings: the jobs run on small shared machines as often as on clusters, so the UI is
off, shuffles use few partitions unless told otherwise, and Arrow is on (the folds exchange Arrow
batches with the Python workers).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from streams.pipeline.source import OpLogDataSource

DEFAULT_MASTER = "local[*]"


def spark_session(
    master: str | None = None, shuffle_partitions: int | None = None, app: str = "streams"
) -> SparkSession:
    """Get (or create) the session; registers the `streams_oplog` source."""
    # Executors must run the same interpreter (streams and its dependencies installed there).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
    )
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OpLogDataSource)
    return spark
