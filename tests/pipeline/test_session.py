"""The Spark session the jobs run in: its driver stays on loopback unless configured otherwise,
and `streams spark ... --progress` shows Spark's console progress bar on stderr (off when
stderr is not a terminal and nothing asks for it). docs/pipeline.md, "Progress and network
settings"."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from streams import progress
from tests.pipeline.conftest import History


def test_the_driver_binds_to_loopback(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"


def _export(history: History, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "streams.cli",
            "spark",
            "export",
            "--bootstrap",
            history.topo.bootstrap[1],
            "--out",
            str(out),
            "--master",
            "local[1]",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_spark_progress_bar_only_when_asked(
    history: History, tmp_path: Path, spark: SparkSession
) -> None:
    shown = _export(history, tmp_path / "a", "--progress")
    assert shown.returncode == 0, shown.stderr
    assert "[Stage " in shown.stderr, shown.stderr
    # Not asked, into a pipe: the jobs' switch says no, and a session built so shows no bar (in
    # process: a second Spark job subprocess would cost this test another 30 s of JVM start).
    args = argparse.ArgumentParser()
    progress.add_arguments(args)
    with open(os.devnull, "w") as pipe_like:
        assert not progress.wanted(args.parse_args([]), stream=pipe_like)
    assert spark.sparkContext.getConf().get("spark.ui.showConsoleProgress") == "false"
