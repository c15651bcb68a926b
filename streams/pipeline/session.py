"""The SparkSession the `streams spark` jobs run in, with the `streams_oplog` source registered.

Why these settings: the jobs run on small shared machines as often as on clusters, so the UI is
off, shuffles use few partitions unless told otherwise, and Arrow is on (the folds exchange Arrow
batches with the Python workers).

Progress: Spark's console progress bar (`spark.ui.showConsoleProgress`: stages, tasks done of
total) is the jobs' progress report, shown as `streams.progress` decides for every long command
(on a terminal unless `--quiet`, anywhere with `--progress`).

Loopback: on a `local[...]` master the driver and its executors are one process, so nothing has
to reach it from outside; left alone Spark binds to the first interface it finds (and warns
"using 192.0.2.2 instead"), opening ports on the network for no reason. So the driver binds to and
advertises 127.0.0.1 (`LOOPBACK_CONF`) unless the user said otherwise: `SPARK_LOCAL_IP` in the
environment (Spark's own variable), one of those keys in `conf` (`streams spark ... --conf
KEY=VALUE`) or in `PYSPARK_SUBMIT_ARGS`, or a master that is not local (a cluster's executors
must reach the driver: Spark's defaults apply).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

from streams.pipeline.source import OpLogDataSource

DEFAULT_MASTER = "local[*]"
LOOPBACK_CONF = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
"""Where a local master's driver listens and what it advertises, unless configured otherwise."""


def loopback_conf(
    master: str, conf: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """`LOOPBACK_CONF` when nothing else was asked for (see the module docstring), else {}."""
    if not master.startswith("local"):
        return {}
    if environ.get("SPARK_LOCAL_IP"):
        return {}
    submit_args = environ.get("PYSPARK_SUBMIT_ARGS", "")
    if any(key in conf or key in submit_args for key in LOOPBACK_CONF):
        return {}
    return dict(LOOPBACK_CONF)


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` options as a dict (ValueError naming a pair without `=`)."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: expected KEY=VALUE (e.g. spark.driver.host=HOST)")
        conf[key.strip()] = value
    return conf


def spark_session(
    master: str | None = None,
    shuffle_partitions: int | None = None,
    app: str = "streams",
    *,
    progress: bool = False,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get (or create) the session; registers the `streams_oplog` source. `progress`: Spark's
    console progress bar on stderr; `conf`: more Spark settings (they win over ours)."""
    # Executors must run the same interpreter (streams and its dependencies installed there).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or DEFAULT_MASTER
    extra = dict(conf or {})
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
    )
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in {**loopback_conf(master, extra), **extra}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OpLogDataSource)
    return spark
