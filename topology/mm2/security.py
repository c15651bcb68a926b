"""A region's `[region.kafka]` (librdkafka properties) as the Java client properties MirrorMaker 2
takes per cluster alias (`A.security.protocol = SSL`).

The two clients name TLS differently: librdkafka reads PEM files (`ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`), Java reads key stores, which Kafka 4 also takes
as PEM (`ssl.truststore.type = PEM` with `ssl.truststore.location`; `ssl.keystore.type = PEM`
with the chain and key as values). Files are never copied into the generated file: the key and
chain are read by Kafka's `DirectoryConfigProvider` when MirrorMaker starts
(`${dir:/etc/kafka:client.key}`), and a SASL password from `sasl.password.file` /
`sasl.password.env` the same way (`${dir:...}`, `${env:...}`), so the properties file holds no
secret unless the topology file itself wrote one in `sasl.password`. SASL PLAIN and SCRAM become
`sasl.jaas.config`.
"""

from __future__ import annotations

import os

PROVIDERS = [
    "config.providers = dir,env",
    "config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider",
    "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider",
]
"""Where `${dir:...}` / `${env:...}` values come from (lines of the properties file)."""

SAME_NAME = (
    "security.protocol",
    "sasl.mechanism",
    "ssl.key.password",
    "ssl.cipher.suites",
    "sasl.kerberos.service.name",
)
"""Properties both clients spell and read alike."""

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class SecurityTranslationError(ValueError):
    """A `[region.kafka]` setting MirrorMaker 2 cannot be given (the message names it)."""


def _file_ref(path: str) -> str:
    """`${dir:DIR:NAME}`: the file's content, read by Kafka when MirrorMaker starts."""
    absolute = os.path.abspath(path)
    return f"${{dir:{os.path.dirname(absolute)}:{os.path.basename(absolute)}}}"


def _quote(value: str) -> str:
    """A JAAS string value (double quotes and backslashes escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_properties(settings: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(Java client properties, librdkafka keys with no Java counterpart, left out) for one
    cluster's `[region.kafka]`."""
    out: dict[str, str] = {}
    left_out: list[str] = []
    for name in SAME_NAME:
        if name in settings:
            out[name] = settings[name]
    if "ssl.ca.location" in settings:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = os.path.abspath(settings["ssl.ca.location"])
    cert, key = settings.get("ssl.certificate.location"), settings.get("ssl.key.location")
    if (cert is None) != (key is None):
        raise SecurityTranslationError(
            "[region.kafka]: ssl.certificate.location and ssl.key.location go together"
        )
    if cert is not None and key is not None:
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = _file_ref(cert)
        out["ssl.keystore.key"] = _file_ref(key)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        out["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else algorithm
    mechanism = settings.get("sasl.mechanism", "").upper()
    if "sasl.username" in settings:
        module = LOGIN_MODULES.get(mechanism)
        if module is None:
            raise SecurityTranslationError(
                f"[region.kafka]: sasl.mechanism {mechanism or '(none)'} with sasl.username:"
                f" MirrorMaker 2's config is generated for {', '.join(LOGIN_MODULES)} only"
            )
        if "sasl.password.file" in settings:
            password = _file_ref(settings["sasl.password.file"])
        elif "sasl.password.env" in settings:
            password = f"${{env:{settings['sasl.password.env']}}}"
        else:
            password = settings.get("sasl.password", "")
        out["sasl.jaas.config"] = (
            f"{module} required username={_quote(settings['sasl.username'])}"
            f" password={_quote(password)};"
        )
    handled = set(SAME_NAME) | {
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.endpoint.identification.algorithm",
        "sasl.username",
        "sasl.password",
        "sasl.password.file",
        "sasl.password.env",
    }
    left_out = sorted(k for k in settings if k not in handled)
    return out, left_out
