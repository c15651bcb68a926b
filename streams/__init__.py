"""Active-active Redis Streams, event-sourced on Kafka."""

from pathlib import Path

from streams import native

__version__ = "0.1.0"

REDIS_COMPAT_VERSION = "7.0.15"
"""The open-source Redis whose stream behaviour we match (and test against)."""

COMPILED = native.install(Path(__file__).parent, __name__)
"""Whether this process runs the compiled core (scripts/build_native.py; `streams.native`)."""
