"""The object store under the durable brokers (topology/objectstore.py), on its own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from topology.objectstore import CREDENTIALS_FILE, ObjectStore, ObjectStoreError, credentials

pytestmark = pytest.mark.slow


def test_a_port_taken_before_the_first_start_means_new_ports_not_a_failure(
    tmp_path: Path,
) -> None:
    """Free ports are only free when looked at: another process may bind one between the
    store's choice and its start (seen in the suite: 'bind: address already in use')."""
    credentials(tmp_path)
    store = ObjectStore(tmp_path / "r1", ["streams-r1"], tmp_path / CREDENTIALS_FILE)
    taken = store.ports["s3"]
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", taken))
    squatter.listen()
    try:
        store.start()
        assert store.alive() and store.ports["s3"] != taken
        store.stop()
        # A restart must keep its ports (a broker may be running against them): taken, it fails.
        held = store.ports["s3"]
        squatter.close()
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", held))
        squatter.listen()
        with pytest.raises(ObjectStoreError, match="exited"):
            store.start(timeout=20)
    finally:
        squatter.close()
        store.kill()
