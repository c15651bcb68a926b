"""`[region.kafka]` and `[topology] compression` in the topology file: what every Kafka client of
a region's cluster is given (`streams.kafka.security`), how secrets are read (a file or an
environment variable, never printed), and what MirrorMaker 2's generated config says for the same
cluster (`topology.mm2`). Pure: no broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.config import TopologyError, dumps, loads
from streams.kafka import security
from streams.kafka.reading import consumer_config
from topology.mm2 import render

BASE = """
[[region]]
name = "r1"
id = 1
bootstrap = "settings.test:{port}"
resp_port = 6380
{extra}
[[region]]
name = "r2"
id = 2
bootstrap = "settings.test:{other}"
resp_port = 6381
"""


def topology_text(extra: str, port: int = 39001, head: str = "") -> str:
    return head + BASE.format(port=port, other=port + 1, extra=extra)


def test_region_settings_reach_every_client_of_its_cluster(tmp_path: Path) -> None:
    secret = tmp_path / "kafka-password"
    secret.write_text("s3cret\n")
    topology = loads(
        topology_text(
            f"""
[region.kafka]
"security.protocol" = "SASL_SSL"
"sasl.mechanism" = "SCRAM-SHA-512"
"sasl.username" = "node"
"sasl.password.file" = "{secret}"
"ssl.ca.location" = "/etc/ca.pem"
""",
            port=39001,
        )
    )
    config = consumer_config("settings.test:39001", "g", 100)
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.password"] == "s3cret"
    assert "sasl.password.file" not in config
    assert security.producer_settings("settings.test:39001")["compression.type"] == "zstd"
    assert "security.protocol" not in consumer_config("settings.test:39002", "g", 100)
    # never printed: neither the region's repr nor the file written back holds the password
    assert "s3cret" not in repr(topology)
    assert "s3cret" not in dumps(topology)
    assert loads(dumps(topology)) == topology


def test_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    loads(topology_text('[region.kafka]\n"sasl.password.env" = "STREAMS_TEST_PW"\n', 39011))
    with pytest.raises(security.KafkaSettingsError, match="no STREAMS_TEST_PW"):
        security.client_settings("settings.test:39011")
    monkeypatch.setenv("STREAMS_TEST_PW", "from-env")
    assert security.client_settings("settings.test:39011")["sasl.password"] == "from-env"


def test_an_unreadable_password_file_names_the_file_not_a_value() -> None:
    loads(topology_text('[region.kafka]\n"sasl.password.file" = "/nonexistent/pw"\n', 39021))
    with pytest.raises(security.KafkaSettingsError, match="/nonexistent/pw: cannot read it"):
        security.client_settings("settings.test:39021")


@pytest.mark.parametrize(
    ("extra", "head", "message"),
    [
        ('[region.kafka]\n"bootstrap.servers" = "x:1"\n', "", "may not set 'bootstrap.servers'"),
        ('[region.kafka]\n"compression.type" = "gzip"\n', "", "set \\[topology\\] compression"),
        ('[region.kafka]\n"ssl.ca" = ["a"]\n', "", "must be a string, number or boolean"),
        (
            '[region.kafka]\n"sasl.password" = "a"\n"sasl.password.env" = "B"\n',
            "",
            "gives sasl.password and where to read it",
        ),
        ("", '[topology]\ncompression = "gzip"\n', "'compression' must be one of none, lz4, zstd"),
        ('[region.tls]\nauth_clients = "maybe"\n', "", "tls-auth-clients must be one of"),
        ('[region.tls]\ncert = "a.pem"\n', "", "unknown key\\(s\\) 'cert'"),
        ("tls_port = 6380\n", "", "resp_port and tls_port are both 6380"),
    ],
)
def test_bad_settings_are_one_clear_line(extra: str, head: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        loads(topology_text(extra, 39031, head))


def test_mm2_config_carries_the_same_security_per_cluster(tmp_path: Path) -> None:
    topology = loads(
        topology_text(
            f"""
[region.kafka]
"security.protocol" = "SSL"
"ssl.ca.location" = "{tmp_path}/ca.pem"
"ssl.certificate.location" = "{tmp_path}/client.pem"
"ssl.key.location" = "{tmp_path}/client.key"
"sasl.mechanism" = "PLAIN"
"sasl.username" = "mm2"
"sasl.password.env" = "MM2_PASSWORD"
""",
            39041,
            '[topology]\ncompression = "lz4"\n',
        )
    )
    text = render(topology)
    assert "r1.security.protocol = SSL" in text
    assert "r1.ssl.truststore.type = PEM" in text
    assert f"r1.ssl.truststore.location = {tmp_path}/ca.pem" in text
    assert "r1.ssl.keystore.type = PEM" in text
    assert f"r1.ssl.keystore.key = ${{dir:{tmp_path}:client.key}}" in text
    assert 'password="${env:MM2_PASSWORD}"' in text
    assert "config.providers = dir,env" in text
    assert "r2.security.protocol" not in text  # r2's cluster is plaintext
    assert "r1.producer.compression.type = lz4" in text
    assert "r2.producer.compression.type = lz4" in text
