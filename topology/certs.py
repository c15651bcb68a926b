"""A certificate authority and certificates for a local topology over TLS (`LocalTopology(...,
tls=True)`, `streams up --tls`), made with the `cryptography` package.

One CA per data directory (or work directory) signs one certificate for every server and client
of the topology (nodes, brokers, mirrors, MirrorMaker 2, the test clients): they all run on this
host as one operator, so one identity is enough, and it holds `localhost` and `127.0.0.1` so a
client that checks host names accepts it. Files are PEM, keys unencrypted PKCS#8 (what Kafka's
PEM keystores, librdkafka, Python's `ssl` and redis-py all read), written with mode 0600. A CA
found in the directory is used again, so a durable topology keeps trusting what it trusted.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650


@dataclass(frozen=True)
class TlsFiles:
    """Where a topology's CA and its certificate are (PEM)."""

    ca: Path
    """The CA certificate every party trusts."""
    cert: Path
    """The certificate (servers and clients alike), signed by the CA."""
    key: Path
    """Its private key (unencrypted PKCS#8)."""
    bundle: Path
    """Key and certificate in one file (what a Java PEM keystore's `ssl.keystore.location`
    takes)."""


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fp:
        fp.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca(directory: Path, name: str = "streams local CA") -> tuple[Path, Path]:
    """A self-signed CA in `directory` (`ca.pem`, `ca.key`), or the one already there."""
    cert_path, key_path = directory / "ca.pem", directory / "ca.key"
    if cert_path.is_file() and key_path.is_file():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def make_certificate(
    directory: Path,
    ca_cert: Path,
    ca_key: Path,
    name: str = "streams",
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
) -> tuple[Path, Path]:
    """`<name>.pem` / `<name>.key` in `directory`: a certificate for servers and clients
    (serverAuth and clientAuth) naming `hosts`, signed by the CA."""
    ca = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False,
        )
        .sign(signer, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def make_tls_files(directory: str | Path) -> TlsFiles:
    """The CA (made once, then kept) and a fresh certificate signed by it under `directory`."""
    base = Path(directory)
    ca_cert, ca_key = make_ca(base)
    cert, key = make_certificate(base, ca_cert, ca_key)
    bundle = base / "streams-bundle.pem"
    _write(bundle, key.read_bytes() + cert.read_bytes(), private=True)
    return TlsFiles(ca_cert, cert, key, bundle)
