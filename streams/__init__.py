"""Active-active Redis Streams, event-sourced on Kafka."""

__version__ = "0.1.0"

REDIS_COMPAT_VERSION = "7.0.15"
"""The open-source Redis whose stream behaviour we match (and test against)."""
