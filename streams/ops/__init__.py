"""The op-log record: Avro schema (`oplog.avsc`) and codec (fastavro).

`schemas/` holds every schema version that ever wrote records (append-only); `oplog.avsc` is the
current one and must equal the newest of them. See `streams.ops.codec` for the wire format.
"""

from streams.ops.codec import (
    SCHEMA_FINGERPRINT,
    Codec,
    DecodeError,
    EncodeError,
    decode,
    encode,
    headers,
)

__all__ = [
    "SCHEMA_FINGERPRINT",
    "Codec",
    "DecodeError",
    "EncodeError",
    "decode",
    "encode",
    "headers",
]
