"""The catalogue of Redis's error replies, byte-identical to Redis 7.0.15.

Every error text that Redis also answers lives here as a constant, so the texts can be checked
against a real redis-server in one place (tests/differential, tests/unit/test_connection_commands)
and the commands do not spell them on their own. The errors of conditions Redis does not have are
written where they arise: the node's write refusals (a fenced writer, a failed batch, a stopped
materializer), its CRDT.* admin commands, replay's READONLY view, and the internal error a bug
gets. A leaf module: it imports nothing of ours, so `streams.ids` may use it too.
"""

from __future__ import annotations


class CommandError(Exception):
    """An error reply. `text` is the whole line Redis sends after '-', code included."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    @property
    def code(self) -> str:
        return self.text.split(" ", 1)[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CommandError) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"CommandError({self.text!r})"


def err(text: str) -> CommandError:
    return CommandError(text)


SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NO_SUCH_KEY = "ERR no such key"
INVALID_ID = "ERR Invalid stream ID specified as stream command argument"
XADD_ID_TOO_SMALL = (
    "ERR The ID specified in XADD is equal or smaller than the target stream top item"
)
XADD_ID_ZERO = "ERR The ID specified in XADD must be greater than 0-0"
XSETID_TOO_SMALL = "ERR The ID specified in XSETID is smaller than the target stream top item"
XSETID_BELOW_LAST = (
    "ERR The ID specified in XSETID is smaller than current last ID "
    "(active-active streams never move the last ID back)"
)
XSETID_ENTRIES_ADDED = (
    "ERR The entries_added specified in XSETID is smaller than the target stream length"
)
XSETID_MAXDEL = "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
STREAM_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ENTRIES_ADDED_NEGATIVE = "ERR entries_added must be positive"
MAXLEN_MINID_TOGETHER = (
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
)
LIMIT_WITHOUT_STRATEGY = (
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
)
XTRIM_NO_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
GROUP_ONLY_XREADGROUP = (
    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
)
NOACK_ONLY_XREADGROUP = (
    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
)
MISSING_GROUP = "ERR Missing GROUP option for XREADGROUP"
STRICT_FULL_ID = (
    "ERR full stream IDs (ms-seq) are refused in strict ID mode: use '*' or a millisecond-only ID"
)
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
XGROUP_KEY_MISSING = (
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to "
    "use the MKSTREAM option to create an empty stream automatically."
)
INVALID_START_ID = "ERR invalid start ID for the interval"
INVALID_END_ID = "ERR invalid end ID for the interval"
XREAD_GT_ONLY_GROUP = (
    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> "
    "<consumer> option."
)
XREADGROUP_DOLLAR = (
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of "
    "this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would "
    "just return an empty result set."
)
TIMEOUT_NEGATIVE = "ERR timeout is negative"
TIMEOUT_NOT_INTEGER = "ERR timeout is not an integer or out of range"
LIMIT_WITHOUT_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
MAXLEN_NEGATIVE = "ERR The MAXLEN argument must be >= 0."
LIMIT_NEGATIVE = "ERR The LIMIT argument must be >= 0."
COUNT_NEGATIVE_XAUTOCLAIM = "ERR COUNT must be > 0"
ENTRIES_READ_INVALID = "ERR value for ENTRIESREAD must be positive or -1"
INVALID_IDLE = "ERR Invalid IDLE option argument for XCLAIM"
INVALID_TIME = "ERR Invalid TIME option argument for XCLAIM"
INVALID_RETRYCOUNT = "ERR Invalid RETRYCOUNT option argument for XCLAIM"
INVALID_MIN_IDLE = "ERR Invalid min-idle-time argument for XCLAIM"
NOGROUP_READGROUP_FMT = (
    "NOGROUP No such key '{key}' or consumer group '{group}' in XREADGROUP with GROUP option"
)
NOGROUP_FMT = "NOGROUP No such key '{key}' or consumer group '{group}'"
XGROUP_NOGROUP_FMT = "NOGROUP No such consumer group '{group}' for key name '{key}'"
UNKNOWN_COMMAND_FMT = "ERR unknown command '{name}', with args beginning with: {args}"
WRONG_ARITY_FMT = "ERR wrong number of arguments for '{name}' command"
UNKNOWN_SUBCOMMAND_FMT = "ERR unknown subcommand '{sub}'. Try {cmd} HELP."


def c_text(raw: bytes, limit: int | None = None) -> str:
    """A client argument as Redis's `%s` / `%.<limit>s` prints it: a C string (cut at the first
    NUL), bytes echoed back as they came (surrogateescape carries non-UTF-8 through the encoder)."""
    cut = raw.split(b"\x00", 1)[0]
    if limit is not None:
        cut = cut[:limit]
    return cut.decode("utf-8", "surrogateescape")


def nogroup_readgroup(key: bytes, group: bytes) -> CommandError:
    return CommandError(NOGROUP_READGROUP_FMT.format(key=c_text(key), group=c_text(group)))


def nogroup(key: bytes, group: bytes) -> CommandError:
    return CommandError(NOGROUP_FMT.format(key=c_text(key), group=c_text(group)))


def xgroup_nogroup(key: bytes, group: bytes) -> CommandError:
    return CommandError(XGROUP_NOGROUP_FMT.format(key=c_text(key), group=c_text(group)))


def wrong_arity(name: str) -> CommandError:
    return CommandError(WRONG_ARITY_FMT.format(name=name.lower()))


def unknown_command(name: bytes, args: list[bytes]) -> CommandError:
    """Redis 7: each argument as a C string (cut at NUL) quoted and followed by a space, at most
    128 bytes in all; raw bytes are echoed back (surrogateescape keeps them through the encoder)."""
    shown = b""
    for arg in args:
        if len(shown) >= 128:
            break
        shown += b"'" + arg.split(b"\x00", 1)[0][: 128 - len(shown)] + b"' "
    return CommandError(UNKNOWN_COMMAND_FMT.format(name=c_text(name, 128), args=c_text(shown)))


def unknown_subcommand(cmd: str, sub: bytes) -> CommandError:
    """Redis: `'%.128s'` of the subcommand as a C string, raw bytes echoed back."""
    return CommandError(UNKNOWN_SUBCOMMAND_FMT.format(sub=c_text(sub, 128), cmd=cmd.upper()))


# --- consumer-group and XINFO texts (Redis 7.0.15, checked against redis-server) ---------------

UNBALANCED_STREAMS = (
    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
)
"""7.0.15 sends this one text for XREAD and XREADGROUP alike (later versions name the command)."""
INVALID_MIN_IDLE_XAUTOCLAIM = "ERR Invalid min-idle-time argument for XAUTOCLAIM"
XCLAIM_UNRECOGNIZED_FMT = "ERR Unrecognized XCLAIM option '{opt}'"
SUBCOMMAND_SYNTAX_FMT = (
    "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP."
)


def xclaim_unrecognized(opt: bytes) -> CommandError:
    return CommandError(XCLAIM_UNRECOGNIZED_FMT.format(opt=c_text(opt)))


def subcommand_syntax(cmd: bytes, sub: bytes) -> CommandError:
    """addReplySubcommandSyntaxError: the subcommand as typed (`%.128s`), the command name
    upper-cased byte by byte (C `toupper`: ASCII letters only)."""
    return CommandError(SUBCOMMAND_SYNTAX_FMT.format(sub=c_text(sub, 128), cmd=c_text(cmd.upper())))


XAUTOCLAIM_COUNT_TOO_HIGH = (
    "ERR Insufficient memory, failed allocating transient memory, COUNT too high."
)


# --- connection, keyspace and transaction texts (Redis 7.0.15, checked against redis-server) -----

UNSUPPORTED_COMMAND_FMT = "ERR unsupported command '{name}': this database holds Redis streams only"
UNSUPPORTED_FEATURE_FMT = "ERR unsupported command '{name}': not available in this database"
NOAUTH = "NOAUTH Authentication required."
NOAUTH_HELLO = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
    "protocol version at the same time"
)
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
AUTH_NOT_CONFIGURED = (
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
HELLO_BAD_PROTO = "ERR Protocol version is not an integer or out of range"
NOPROTO = "NOPROTO unsupported protocol version"
HELLO_SYNTAX_FMT = "ERR Syntax error in HELLO option '{opt}'"
BAD_CLIENT_NAME = "ERR Client names cannot contain spaces, newlines or special characters."
DB_OUT_OF_RANGE = "ERR DB index is out of range"
INVALID_CURSOR = "ERR invalid cursor"
MULTI_NESTED = "ERR MULTI calls can not be nested"
EXEC_WITHOUT_MULTI = "ERR EXEC without MULTI"
DISCARD_WITHOUT_MULTI = "ERR DISCARD without MULTI"
EXECABORT = "EXECABORT Transaction discarded because of previous errors."
WATCH_INSIDE_MULTI = "ERR WATCH inside MULTI is not allowed"
WATCH_UNSUPPORTED = (
    "ERR WATCH is not supported: regions accept writes concurrently, so optimistic locking "
    "cannot hold; use MULTI/EXEC alone (it runs as one unit in this region)"
)
NOT_IN_MULTI = "ERR Command not allowed inside a transaction"
CONFIG_SET_UNKNOWN_FMT = "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
CONFIG_SET_FAILED_FMT = "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
NO_CONFIG_FILE = "ERR The server is running without a config file"
LOADING = "LOADING Redis is loading the dataset in memory"
EXECABORT_BECAUSE_FMT = "EXECABORT Transaction discarded because of: {reason}"
GETKEYS_INVALID_COMMAND = "ERR Invalid command specified"
GETKEYS_INVALID_ARITY = "ERR Invalid number of arguments specified for command"
GETKEYS_NO_KEYS = "ERR The command has no key arguments"
INVALID_CLIENT_ID = "ERR Invalid client ID"
UNKNOWN_CLIENT_TYPE_FMT = "ERR Unknown client type '{kind}'"
SETINFO_OPTION_FMT = "ERR Unrecognized option '{opt}'"
SETINFO_VALUE_FMT = "ERR {attr} cannot contain spaces, newlines or special characters."

# --- monitoring texts (Redis 7.0.15 slowlog.c / latency.c / config.c / blocked.c) -------------

SLOWLOG_COUNT = "ERR count should be greater than or equal to -1"
LATENCY_NO_SAMPLES_FMT = "ERR No samples available for event '{event}'"
LATENCY_GRAPH_UNSUPPORTED = (
    "ERR LATENCY GRAPH is not drawn by this database: LATENCY HISTORY gives the same samples"
)
"""Ours: the ASCII sparkline is not drawn (Redis draws it)."""
PERCENTILES_INVALID = "Invalid latency-tracking-info-percentiles parameters"
PERCENTILES_RANGE = "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
UNBLOCKED_KEY_DELETED = "UNBLOCKED the stream key no longer exists"
"""A blocked XREADGROUP whose key was deleted (DEL, FLUSHALL, ...) while it waited."""
NOGROUP_BLOCKED = "NOGROUP the consumer group this client was blocked on no longer exists"
"""A blocked XREADGROUP whose group was destroyed while it waited."""


# --- Redis Cluster texts (Redis 7.0.15 cluster.c / server.c, checked against a 2-master cluster) --

CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot"
MOVED_FMT = "MOVED {slot} {endpoint}:{port}"
"""clusterRedirectClient: the slot, the owner's preferred endpoint (its IP) and client port."""
CLUSTER_DISABLED = "ERR This instance has cluster support disabled"
INVALID_SLOT = "ERR Invalid slot"
"""CLUSTER COUNTKEYSINSLOT with an integer outside 0..16383."""
INVALID_SLOT_OR_COUNT = "ERR Invalid slot or number of keys"
"""CLUSTER GETKEYSINSLOT with a slot outside 0..16383 or a negative count."""
UNKNOWN_NODE_FMT = "ERR Unknown node {node}"
GETKEYS_INVALID_ARGS = "ERR Invalid arguments specified for command"
"""COMMAND GETKEYS when the command's key specs find no key in the arguments given."""


def moved(slot: int, endpoint: str, port: int) -> CommandError:
    return CommandError(MOVED_FMT.format(slot=slot, endpoint=endpoint, port=port))


def unknown_node(node: bytes) -> CommandError:
    """`Unknown node %s` of the argument as a C string."""
    return CommandError(UNKNOWN_NODE_FMT.format(node=c_text(node)))


# --- the stream commands of Redis 8 (t_stream.c of redis/redis, 8.2 to 8.8; the texts the newest
# tests/unit/type/stream*.tcl match, completed from clients checked against a live 8.x server) --

NUMIDS_NOT_POSITIVE = "ERR Number of IDs must be a positive integer"
"""XDELEX / XACKDEL: `IDS numids` that is not an integer >= 1."""
NUMIDS_MISMATCH = "ERR The `numids` parameter must match the number of arguments"
"""XDELEX / XACKDEL: fewer IDs after `IDS numids` than numids (more is a syntax error)."""
IDMP_WITH_EXPLICIT_ID = "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"
IDMP_TWICE = "ERR IDMP/IDMPAUTO specified multiple times"
IDMP_EMPTY_PID = "ERR IDMP requires a non-empty producer ID"
IDMP_EMPTY_IID = "ERR IDMP requires a non-empty idempotent ID"
IDMPAUTO_EMPTY_PID = "ERR IDMPAUTO requires a non-empty producer ID"
XCFGSET_NO_PARAMETER = "ERR At least one parameter (IDMP-DURATION or IDMP-MAXSIZE) is required"
IDMP_DURATION_RANGE = "ERR IDMP-DURATION must be between 1 and 86400 seconds"
IDMP_MAXSIZE_RANGE = "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"
CLAIM_NOT_INTEGER = "ERR min-idle-time is not an integer or out of range"
"""XREADGROUP CLAIM with a value `string2ll` refuses (`-0`, `+10`, `5.5` ...)."""
CLAIM_NEGATIVE = "ERR min-idle-time must be a positive integer"
CLAIM_ONLY_XREADGROUP = "ERR The CLAIM option is only supported by XREADGROUP"
XNACK_MODE = "ERR mode must be SILENT, FAIL, or FATAL"
XNACK_UNRECOGNIZED_FMT = "ERR Unrecognized XNACK option '{opt}'"
XNACK_NO_IDS = "ERR syntax error, expected IDS keyword"
XNACK_NUMIDS_NOT_POSITIVE = "ERR numids must be a positive integer"
XNACK_NUMIDS_MISMATCH = "ERR number of IDs doesn't match numids"
XNACK_RETRYCOUNT_NEGATIVE = "ERR Invalid RETRYCOUNT value, must be >= 0"


def xnack_unrecognized(opt: bytes) -> CommandError:
    return CommandError(XNACK_UNRECOGNIZED_FMT.format(opt=c_text(opt)))


XIDMPRECORD_NO_ENTRY = "ERR No such message in stream"
"""XIDMPRECORD naming an ID no entry has (Redis's internal command: its tests do not pin it; the
text is the one third-party servers answer)."""
