"""Spark's fixed wait for a Python worker, recognised by the Java exception it throws.

Spark starts a Python process for a Python data source's planner and streaming runner and waits a
fixed 10 s for it to connect back (`PythonWorkerFactory.createSimpleWorker`: `Selector.select(
10000)`, read in Spark 4.3.0's bytecode; no setting changes it). On a 2-core machine running
other tests' brokers beside Spark, a worker can miss it (CI, stops 46 and 47, both times a follow
query before its first batch). A streaming query that fails that way is restarted from its
checkpoint, which is what the product's follow job relies on anyway; these helpers let a test
tell that failure from any other (which still fails the test) by the exception's Java class and
the frame that threw it, not by its message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql.streaming import StreamingQuery

WORKER_FACTORY = "org.apache.spark.api.python.PythonWorkerFactory"


def _java_throwables(exc: BaseException) -> Iterator[Any]:
    """Every Java throwable behind a PySpark exception: its origin, its cause's, and their
    causes (PySpark keeps the Java object as `_origin`, the converted cause as `_cause`)."""
    seen: BaseException | None = exc
    while seen is not None:
        java = getattr(seen, "_origin", None)
        while java is not None:
            yield java
            java = java.getCause()
        seen = getattr(seen, "_cause", None)


def missed_python_worker(exc: BaseException) -> bool:
    """Whether `exc` is Spark giving up on a Python worker that did not connect back in 10 s."""
    for java in _java_throwables(exc):
        if java.getClass().getName() != "java.net.SocketTimeoutException":
            continue
        frames = java.getStackTrace()
        if any(str(frame.getClassName()).startswith(WORKER_FACTORY) for frame in frames):
            return True
    return False


def run_until(
    start: Callable[[], StreamingQuery], done: Callable[[StreamingQuery], None], tries: int = 3
) -> None:
    """Start the query, wait for `done`, stop it. A query that Spark failed because a Python
    worker missed its fixed 10 s to connect back (a busy 2-core machine) is started again from
    its checkpoint (up to `tries` in all), as a supervisor would; any other failure is raised."""
    for attempt in range(1, tries + 1):
        query = start()
        try:
            done(query)
            return
        except Exception as failed:
            if attempt == tries or not missed_python_worker(failed):
                raise
            print(f"Spark missed a Python worker (try {attempt} of {tries}): starting again")
        finally:
            query.stop()


def run_to_end(start: Callable[[], StreamingQuery], tries: int = 3) -> None:
    """`run_until` an `available_now` query's end."""
    run_until(start, lambda query: query.awaitTermination(), tries)


def failure_of(start: Callable[[], StreamingQuery], tries: int = 3) -> Exception:
    """The exception an `available_now` query that must fail ends with, other than a Python
    worker missing Spark's 10 s (then the query is started again, up to `tries` in all)."""
    try:
        run_to_end(start, tries)
    except Exception as failed:
        return failed
    raise AssertionError("the query ended without failing")
