"""Test hosts: a network namespace per Kafka cluster, joined to this machine by a veth pair, so a
test can cut a cluster off the network (its link down) and heal it (up) while everything else
runs on. Needs root (`ip netns`, iproute2); `available()` says whether this machine can."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from topology.brokers import BrokerHost

SUBNET = "10.231"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def available() -> str | None:
    """None when test hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "test hosts need root (ip netns)"
    if shutil.which("ip") is None:
        return "test hosts need iproute2's `ip`"
    return None


class Host:
    """Namespace `name` holding `address` (10.231.<index>.2), reached through `<name>-h`."""

    def __init__(self, name: str, index: int) -> None:
        self.name = name
        self.link = f"{name}-h"
        self.address = f"{SUBNET}.{index}.2"
        self._gateway = f"{SUBNET}.{index}.1"

    @property
    def broker_host(self) -> BrokerHost:
        return BrokerHost(self.name, self.address)

    def create(self) -> None:
        self.remove()
        _ip("netns", "add", self.name)
        _ip("link", "add", self.link, "type", "veth", "peer", "name", f"{self.name}-n")
        _ip("link", "set", f"{self.name}-n", "netns", self.name)
        _ip("addr", "add", f"{self._gateway}/24", "dev", self.link)
        _ip("link", "set", self.link, "up")
        inside = ["netns", "exec", self.name, "ip"]
        _ip(*inside, "addr", "add", f"{self.address}/24", "dev", f"{self.name}-n")
        _ip(*inside, "link", "set", f"{self.name}-n", "up")
        _ip(*inside, "link", "set", "lo", "up")

    def down(self) -> None:
        """Cut the host off: nothing reaches it and it reaches nothing. The link is taken down
        on the namespace's side: this machine keeps its route to the host (flagged `linkdown`),
        so packets to it are dropped and connections time out, as in a real partition. Taking
        the machine's side down instead removes that route, and connections to the host's
        address follow the default route: on these machines a proxy there accepts any TCP
        connection and answers `HTTP/1.1 400`, which a Kafka client reads as a response of
        1,213,486,160 bytes (b"HTTP"): MirrorMaker 2 died of OutOfMemoryError in
        NetworkReceive.readFrom during the partition test (issue 32)."""
        _ip("netns", "exec", self.name, "ip", "link", "set", f"{self.name}-n", "down")

    def up(self) -> None:
        _ip("netns", "exec", self.name, "ip", "link", "set", f"{self.name}-n", "up")

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


@contextmanager
def hosts(count: int, prefix: str = "stk") -> Iterator[dict[int, Host]]:
    """Hosts 1..count (namespaces `<prefix><pid%1000>-<i>`), removed on exit."""
    made = {i: Host(f"{prefix}{os.getpid() % 1000}x{i}", i) for i in range(1, count + 1)}
    try:
        for host in made.values():
            host.create()
        yield made
    finally:
        for host in made.values():
            host.remove()
