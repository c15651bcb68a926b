"""The Redis 7.0 command catalogue, and the clear error for the commands this database does not
implement.

`REDIS7_COMMANDS` maps every command and subcommand name of redis-server 7.0.15 (from its
`COMMAND` and `COMMAND DOCS` output) to its documentation group. A name in it that we do not
implement (SET, LPUSH, CLIENT KILL, ...) answers `unsupported(...)`, so a client learns at once
that this is a streams-only database instead of reading Redis's unknown-command error; a name that
is in no Redis 7 version keeps Redis's unknown-command error. `META` carries Redis's flags, ACL
categories, tips and docs for the commands we do implement, for COMMAND INFO and COMMAND DOCS.
"""

from __future__ import annotations

from typing import NamedTuple

from streams import errors
from streams.errors import CommandError

DATA_GROUPS = frozenset(
    {"string", "list", "hash", "set", "sorted-set", "hyperloglog", "geo", "bitmap", "generic"}
)
"""Groups of commands over data types (and generic key commands such as EXPIRE)."""


class CommandMeta(NamedTuple):
    """Redis's own description of a command we implement (space-separated lists)."""

    flags: str
    acl: str
    tips: str
    group: str
    since: str
    summary: str
    complexity: str


def _by_group(groups: dict[str, str]) -> dict[str, str]:
    return {name: group for group, names in groups.items() for name in names.split()}


REDIS7_COMMANDS: dict[str, str] = _by_group(
    {
        "bitmap": (
            "bitcount bitfield bitfield_ro bitop bitpos getbit setbit"
        ),
        "cluster": (
            "asking cluster cluster|addslots cluster|addslotsrange cluster|bumpepoch "
            "cluster|count-failure-reports cluster|countkeysinslot cluster|delslots "
            "cluster|delslotsrange cluster|failover cluster|flushslots cluster|forget "
            "cluster|getkeysinslot cluster|help cluster|info cluster|keyslot cluster|links "
            "cluster|meet cluster|myid cluster|nodes cluster|replicas cluster|replicate "
            "cluster|reset cluster|saveconfig cluster|set-config-epoch cluster|setslot "
            "cluster|shards cluster|slaves cluster|slots readonly readwrite"
        ),
        "connection": (
            "auth client client|caching client|getname client|getredir client|help client|id "
            "client|info client|kill client|list client|no-evict client|pause client|reply "
            "client|setname client|tracking client|trackinginfo client|unblock client|unpause "
            "echo hello ping quit reset select"
        ),
        "generic": (
            "copy del dump exists expire expireat expiretime keys migrate move object "
            "object|encoding object|freq object|help object|idletime object|refcount persist "
            "pexpire pexpireat pexpiretime pttl randomkey rename renamenx restore scan sort "
            "sort_ro touch ttl type unlink wait"
        ),
        "geo": (
            "geoadd geodist geohash geopos georadius georadius_ro georadiusbymember "
            "georadiusbymember_ro geosearch geosearchstore"
        ),
        "hash": (
            "hdel hexists hget hgetall hincrby hincrbyfloat hkeys hlen hmget hmset hrandfield "
            "hscan hset hsetnx hstrlen hvals"
        ),
        "hyperloglog": (
            "pfadd pfcount pfdebug pfmerge pfselftest"
        ),
        "list": (
            "blmove blmpop blpop brpop brpoplpush lindex linsert llen lmove lmpop lpop lpos lpush "
            "lpushx lrange lrem lset ltrim rpop rpoplpush rpush rpushx"
        ),
        "pubsub": (
            "psubscribe publish pubsub pubsub|channels pubsub|help pubsub|numpat pubsub|numsub "
            "pubsub|shardchannels pubsub|shardnumsub punsubscribe spublish ssubscribe subscribe "
            "sunsubscribe unsubscribe"
        ),
        "scripting": (
            "eval eval_ro evalsha evalsha_ro fcall fcall_ro function function|delete "
            "function|dump function|flush function|help function|kill function|list function|load "
            "function|restore function|stats script script|debug script|exists script|flush "
            "script|help script|kill script|load"
        ),
        "server": (
            "acl acl|cat acl|deluser acl|dryrun acl|genpass acl|getuser acl|help acl|list "
            "acl|load acl|log acl|save acl|setuser acl|users acl|whoami bgrewriteaof bgsave "
            "command command|count command|docs command|getkeys command|getkeysandflags "
            "command|help command|info command|list config config|get config|help "
            "config|resetstat config|rewrite config|set dbsize debug failover flushall flushdb "
            "info lastsave latency latency|doctor latency|graph latency|help latency|histogram "
            "latency|history latency|latest latency|reset lolwut memory memory|doctor memory|help "
            "memory|malloc-stats memory|purge memory|stats memory|usage module module|help "
            "module|list module|load module|loadex module|unload monitor psync replconf replicaof "
            "restore-asking role save shutdown slaveof slowlog slowlog|get slowlog|help "
            "slowlog|len slowlog|reset swapdb sync time"
        ),
        "set": (
            "sadd scard sdiff sdiffstore sinter sintercard sinterstore sismember smembers "
            "smismember smove spop srandmember srem sscan sunion sunionstore"
        ),
        "sorted-set": (
            "bzmpop bzpopmax bzpopmin zadd zcard zcount zdiff zdiffstore zincrby zinter "
            "zintercard zinterstore zlexcount zmpop zmscore zpopmax zpopmin zrandmember zrange "
            "zrangebylex zrangebyscore zrangestore zrank zrem zremrangebylex zremrangebyrank "
            "zremrangebyscore zrevrange zrevrangebylex zrevrangebyscore zrevrank zscan zscore "
            "zunion zunionstore"
        ),
        "stream": (
            "xack xadd xautoclaim xclaim xdel xgroup xgroup|create xgroup|createconsumer "
            "xgroup|delconsumer xgroup|destroy xgroup|help xgroup|setid xinfo xinfo|consumers "
            "xinfo|groups xinfo|help xinfo|stream xlen xpending xrange xread xreadgroup xrevrange "
            "xsetid xtrim"
        ),
        "string": (
            "append decr decrby get getdel getex getrange getset incr incrby incrbyfloat lcs mget "
            "mset msetnx psetex set setex setnx setrange strlen substr"
        ),
        "transactions": (
            "discard exec multi unwatch watch"
        ),
    }
)

META: dict[str, CommandMeta] = {
    "xadd": CommandMeta(
        "write denyoom fast",
        "@write @stream @fast",
        "nondeterministic_output",
        "stream",
        "5.0.0",
        "Appends a new entry to a stream",
        (
            "O(1) when adding a new entry, O(N) when trimming where N being the number of "
            "entries evicted."
        ),
    ),
    "xtrim": CommandMeta(
        "write",
        "@write @stream @slow",
        "nondeterministic_output",
        "stream",
        "5.0.0",
        "Trims the stream to (approximately if '~' is passed) a certain size",
        (
            "O(N), with N being the number of evicted entries. Constant times are very small "
            "however, since entries are organized in macro nodes containing multiple entries "
            "that can be released with a single deallocation."
        ),
    ),
    "xdel": CommandMeta(
        "write fast",
        "@write @stream @fast",
        "",
        "stream",
        "5.0.0",
        (
            "Removes the specified entries from the stream. Returns the number of items "
            "actually deleted, that may be different from the number of IDs passed in case "
            "certain IDs do not exist."
        ),
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
    ),
    "xsetid": CommandMeta(
        "write denyoom fast",
        "@write @stream @fast",
        "",
        "stream",
        "5.0.0",
        "An internal command for replicating stream values",
        "O(1)",
    ),
    "xlen": CommandMeta(
        "readonly fast",
        "@read @stream @fast",
        "",
        "stream",
        "5.0.0",
        "Return the number of entries in a stream",
        "O(1)",
    ),
    "xrange": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Return a range of elements in a stream, with IDs matching the specified IDs interval",
        (
            "O(N) with N being the number of elements being returned. If N is constant (e.g. "
            "always asking for the first 10 elements with COUNT), you can consider it O(1)."
        ),
    ),
    "xrevrange": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "",
        "stream",
        "5.0.0",
        (
            "Return a range of elements in a stream, with IDs matching the specified IDs "
            "interval, in reverse order (from greater to smaller IDs) compared to XRANGE"
        ),
        (
            "O(N) with N being the number of elements returned. If N is constant (e.g. always"
            " asking for the first 10 elements with COUNT), you can consider it O(1)."
        ),
    ),
    "xread": CommandMeta(
        "readonly blocking movablekeys",
        "@read @stream @slow @blocking",
        "",
        "stream",
        "5.0.0",
        (
            "Return never seen elements in multiple streams, with IDs greater than the ones "
            "reported by the caller for each stream. Can block."
        ),
        (
            "For each stream mentioned: O(N) with N being the number of elements being "
            "returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the"
            " BLOCK option is used, XADD will pay O(M) time in order to serve the M clients "
            "blocked on the stream getting new data."
        ),
    ),
    "xgroup": CommandMeta(
        "",
        "@slow",
        "",
        "stream",
        "5.0.0",
        "A container for consumer groups commands",
        "Depends on subcommand.",
    ),
    "xgroup|create": CommandMeta(
        "write denyoom",
        "@write @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Create a consumer group.",
        "O(1)",
    ),
    "xgroup|setid": CommandMeta(
        "write",
        "@write @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Set a consumer group to an arbitrary last delivered ID value.",
        "O(1)",
    ),
    "xgroup|destroy": CommandMeta(
        "write",
        "@write @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Destroy a consumer group.",
        "O(N) where N is the number of entries in the group's pending entries list (PEL).",
    ),
    "xgroup|createconsumer": CommandMeta(
        "write denyoom",
        "@write @stream @slow",
        "",
        "stream",
        "6.2.0",
        "Create a consumer in a consumer group.",
        "O(1)",
    ),
    "xgroup|delconsumer": CommandMeta(
        "write",
        "@write @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Delete a consumer from a consumer group.",
        "O(1)",
    ),
    "xgroup|help": CommandMeta(
        "loading stale",
        "@stream @slow",
        "",
        "stream",
        "5.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
    ),
    "xack": CommandMeta(
        "write fast",
        "@write @stream @fast",
        "",
        "stream",
        "5.0.0",
        (
            "Marks a pending message as correctly processed, effectively removing it from the"
            " pending entries list of the consumer group. Return value of the command is the "
            "number of messages successfully acknowledged, that is, the IDs we were actually "
            "able to resolve in the PEL."
        ),
        "O(1) for each message ID processed.",
    ),
    "xreadgroup": CommandMeta(
        "write blocking movablekeys",
        "@write @stream @slow @blocking",
        "",
        "stream",
        "5.0.0",
        (
            "Return new entries from a stream using a consumer group, or access the history "
            "of the pending entries for a given consumer. Can block."
        ),
        (
            "For each stream mentioned: O(M) with M being the number of elements returned. If"
            " M is constant (e.g. always asking for the first 10 elements with COUNT), you "
            "can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay "
            "the O(N) time in order to serve the N clients blocked on the stream getting new "
            "data."
        ),
    ),
    "xpending": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "nondeterministic_output",
        "stream",
        "5.0.0",
        (
            "Return information and entries from a stream consumer group pending entries "
            "list, that are messages fetched but never acknowledged."
        ),
        (
            "O(N) with N being the number of elements returned, so asking for a small fixed "
            "number of entries per call is O(1). O(M), where M is the total number of entries"
            " scanned when used with the IDLE filter. When the command returns just the "
            "summary and the list of consumers is small, it runs in O(1) time; otherwise, an "
            "additional O(N) time for iterating every consumer."
        ),
    ),
    "xclaim": CommandMeta(
        "write fast",
        "@write @stream @fast",
        "nondeterministic_output",
        "stream",
        "5.0.0",
        (
            "Changes (or acquires) ownership of a message in a consumer group, as if the "
            "message was delivered to the specified consumer."
        ),
        "O(log N) with N being the number of messages in the PEL of the consumer group.",
    ),
    "xautoclaim": CommandMeta(
        "write fast",
        "@write @stream @fast",
        "nondeterministic_output",
        "stream",
        "6.2.0",
        (
            "Changes (or acquires) ownership of messages in a consumer group, as if the "
            "messages were delivered to the specified consumer."
        ),
        "O(1) if COUNT is small.",
    ),
    "xinfo": CommandMeta(
        "",
        "@slow",
        "",
        "stream",
        "5.0.0",
        "A container for stream introspection commands",
        "Depends on subcommand.",
    ),
    "xinfo|stream": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "",
        "stream",
        "5.0.0",
        "Get information about a stream",
        "O(1)",
    ),
    "xinfo|groups": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "",
        "stream",
        "5.0.0",
        "List the consumer groups of a stream",
        "O(1)",
    ),
    "xinfo|consumers": CommandMeta(
        "readonly",
        "@read @stream @slow",
        "nondeterministic_output",
        "stream",
        "5.0.0",
        "List the consumers in a consumer group",
        "O(1)",
    ),
    "xinfo|help": CommandMeta(
        "loading stale",
        "@stream @slow",
        "",
        "stream",
        "5.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
    ),
    "del": CommandMeta(
        "write",
        "@keyspace @write @slow",
        "request_policy:multi_shard response_policy:agg_sum",
        "generic",
        "1.0.0",
        "Delete a key",
        (
            "O(N) where N is the number of keys that will be removed. When a key to remove "
            "holds a value other than a string, the individual complexity for this key is "
            "O(M) where M is the number of elements in the list, set, sorted set or hash. "
            "Removing a single key that holds a string value is O(1)."
        ),
    ),
    "unlink": CommandMeta(
        "write fast",
        "@keyspace @write @fast",
        "request_policy:multi_shard response_policy:agg_sum",
        "generic",
        "4.0.0",
        (
            "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but "
            "non blocking."
        ),
        (
            "O(1) for each key removed regardless of its size. Then the command does O(N) "
            "work in a different thread in order to reclaim memory, where N is the number of "
            "allocations the deleted objects where composed of."
        ),
    ),
    "exists": CommandMeta(
        "readonly fast",
        "@keyspace @read @fast",
        "request_policy:multi_shard response_policy:agg_sum",
        "generic",
        "1.0.0",
        "Determine if a key exists",
        "O(N) where N is the number of keys to check.",
    ),
    "type": CommandMeta(
        "readonly fast",
        "@keyspace @read @fast",
        "",
        "generic",
        "1.0.0",
        "Determine the type stored at key",
        "O(1)",
    ),
    "dbsize": CommandMeta(
        "readonly fast",
        "@keyspace @read @fast",
        "request_policy:all_shards response_policy:agg_sum",
        "server",
        "1.0.0",
        "Return the number of keys in the selected database",
        "O(1)",
    ),
    "keys": CommandMeta(
        "readonly",
        "@keyspace @read @slow @dangerous",
        "request_policy:all_shards nondeterministic_output_order",
        "generic",
        "1.0.0",
        "Find all keys matching the given pattern",
        (
            "O(N) with N being the number of keys in the database, under the assumption that "
            "the key names in the database and the given pattern have limited length."
        ),
    ),
    "scan": CommandMeta(
        "readonly",
        "@keyspace @read @slow",
        "nondeterministic_output request_policy:special",
        "generic",
        "2.8.0",
        "Incrementally iterate the keys space",
        (
            "O(1) for every call. O(N) for a complete iteration, including enough command "
            "calls for the cursor to return back to 0. N is the number of elements inside the"
            " collection."
        ),
    ),
    "rename": CommandMeta(
        "write",
        "@keyspace @write @slow",
        "",
        "generic",
        "1.0.0",
        "Rename a key",
        "O(1)",
    ),
    "renamenx": CommandMeta(
        "write fast",
        "@keyspace @write @fast",
        "",
        "generic",
        "1.0.0",
        "Rename a key, only if the new key does not exist",
        "O(1)",
    ),
    "flushdb": CommandMeta(
        "write",
        "@keyspace @write @slow @dangerous",
        "request_policy:all_shards response_policy:all_succeeded",
        "server",
        "1.0.0",
        "Remove all keys from the current database",
        "O(N) where N is the number of keys in the selected database",
    ),
    "flushall": CommandMeta(
        "write",
        "@keyspace @write @slow @dangerous",
        "request_policy:all_shards response_policy:all_succeeded",
        "server",
        "1.0.0",
        "Remove all keys from all databases",
        "O(N) where N is the total number of keys in all databases",
    ),
    "ping": CommandMeta(
        "fast",
        "@fast @connection",
        "request_policy:all_shards response_policy:all_succeeded",
        "connection",
        "1.0.0",
        "Ping the server",
        "O(1)",
    ),
    "echo": CommandMeta(
        "loading stale fast",
        "@fast @connection",
        "",
        "connection",
        "1.0.0",
        "Echo the given string",
        "O(1)",
    ),
    "hello": CommandMeta(
        "noscript loading stale fast no_auth allow_busy",
        "@fast @connection",
        "",
        "connection",
        "6.0.0",
        "Handshake with Redis",
        "O(1)",
    ),
    "auth": CommandMeta(
        "noscript loading stale fast no_auth allow_busy",
        "@fast @connection",
        "",
        "connection",
        "1.0.0",
        "Authenticate to the server",
        "O(N) where N is the number of passwords defined for the user",
    ),
    "quit": CommandMeta(
        "noscript loading stale fast no_auth allow_busy",
        "@fast @connection",
        "",
        "connection",
        "1.0.0",
        "Close the connection",
        "O(1)",
    ),
    "reset": CommandMeta(
        "noscript loading stale fast no_auth allow_busy",
        "@fast @connection",
        "",
        "connection",
        "6.2.0",
        "Reset the connection",
        "O(1)",
    ),
    "select": CommandMeta(
        "loading stale fast",
        "@fast @connection",
        "",
        "connection",
        "1.0.0",
        "Change the selected database for the current connection",
        "O(1)",
    ),
    "multi": CommandMeta(
        "noscript loading stale fast allow_busy",
        "@fast @transaction",
        "",
        "transactions",
        "1.2.0",
        "Mark the start of a transaction block",
        "O(1)",
    ),
    "exec": CommandMeta(
        "noscript loading stale skip_slowlog",
        "@slow @transaction",
        "",
        "transactions",
        "1.2.0",
        "Execute all commands issued after MULTI",
        "Depends on commands in the transaction",
    ),
    "discard": CommandMeta(
        "noscript loading stale fast allow_busy",
        "@fast @transaction",
        "",
        "transactions",
        "2.0.0",
        "Discard all commands issued after MULTI",
        "O(N), when N is the number of queued commands",
    ),
    "watch": CommandMeta(
        "noscript loading stale fast allow_busy",
        "@fast @transaction",
        "",
        "transactions",
        "2.2.0",
        "Watch the given keys to determine execution of the MULTI/EXEC block",
        "O(1) for every key.",
    ),
    "unwatch": CommandMeta(
        "noscript loading stale fast allow_busy",
        "@fast @transaction",
        "",
        "transactions",
        "2.2.0",
        "Forget about all watched keys",
        "O(1)",
    ),
    "info": CommandMeta(
        "loading stale",
        "@slow @dangerous",
        "nondeterministic_output request_policy:all_shards response_policy:special",
        "server",
        "1.0.0",
        "Get information and statistics about the server",
        "O(1)",
    ),
    "config": CommandMeta(
        "",
        "@slow",
        "",
        "server",
        "2.0.0",
        "A container for server configuration commands",
        "Depends on subcommand.",
    ),
    "config|get": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous",
        "",
        "server",
        "2.0.0",
        "Get the values of configuration parameters",
        "O(N) when N is the number of configuration parameters provided",
    ),
    "config|set": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous",
        "request_policy:all_nodes response_policy:all_succeeded",
        "server",
        "2.0.0",
        "Set configuration parameters to the given values",
        "O(N) when N is the number of configuration parameters provided",
    ),
    "config|resetstat": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous",
        "",
        "server",
        "2.0.0",
        "Reset the stats returned by INFO",
        "O(1)",
    ),
    "config|rewrite": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous",
        "",
        "server",
        "2.8.0",
        "Rewrite the configuration file with the in memory configuration",
        "O(1)",
    ),
    "config|help": CommandMeta(
        "loading stale",
        "@slow",
        "",
        "server",
        "5.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
    ),
    "client": CommandMeta(
        "",
        "@slow",
        "",
        "connection",
        "2.4.0",
        "A container for client connection commands",
        "Depends on subcommand.",
    ),
    "client|id": CommandMeta(
        "noscript loading stale",
        "@slow @connection",
        "",
        "connection",
        "5.0.0",
        "Returns the client ID for the current connection",
        "O(1)",
    ),
    "client|getname": CommandMeta(
        "noscript loading stale",
        "@slow @connection",
        "",
        "connection",
        "2.6.9",
        "Get the current connection name",
        "O(1)",
    ),
    "client|setname": CommandMeta(
        "noscript loading stale",
        "@slow @connection",
        "",
        "connection",
        "2.6.9",
        "Set the current connection name",
        "O(1)",
    ),
    "client|info": CommandMeta(
        "noscript loading stale",
        "@slow @connection",
        "nondeterministic_output",
        "connection",
        "6.2.0",
        "Returns information about the current client connection.",
        "O(1)",
    ),
    "client|list": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous @connection",
        "nondeterministic_output",
        "connection",
        "2.4.0",
        "Get the list of client connections",
        "O(N) where N is the number of client connections",
    ),
    "client|no-evict": CommandMeta(
        "admin noscript loading stale",
        "@admin @slow @dangerous @connection",
        "",
        "connection",
        "7.0.0",
        "Set client eviction mode for the current connection",
        "O(1)",
    ),
    "client|help": CommandMeta(
        "loading stale",
        "@slow @connection",
        "",
        "connection",
        "5.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
    ),
    "command": CommandMeta(
        "loading stale",
        "@slow @connection",
        "nondeterministic_output_order",
        "server",
        "2.8.13",
        "Get array of Redis command details",
        "O(N) where N is the total number of Redis commands",
    ),
    "command|count": CommandMeta(
        "loading stale",
        "@slow @connection",
        "",
        "server",
        "2.8.13",
        "Get total number of Redis commands",
        "O(1)",
    ),
    "command|info": CommandMeta(
        "loading stale",
        "@slow @connection",
        "nondeterministic_output_order",
        "server",
        "2.8.13",
        "Get array of specific Redis command details, or all when no argument is given.",
        "O(N) where N is the number of commands to look up",
    ),
    "command|docs": CommandMeta(
        "loading stale",
        "@slow @connection",
        "nondeterministic_output_order",
        "server",
        "7.0.0",
        "Get array of specific Redis command documentation",
        "O(N) where N is the number of commands to look up",
    ),
    "command|list": CommandMeta(
        "loading stale",
        "@slow @connection",
        "nondeterministic_output_order",
        "server",
        "7.0.0",
        "Get an array of Redis command names",
        "O(N) where N is the total number of Redis commands",
    ),
    "command|getkeys": CommandMeta(
        "loading stale",
        "@slow @connection",
        "",
        "server",
        "2.8.13",
        "Extract keys given a full Redis command",
        "O(N) where N is the number of arguments to the command",
    ),
    "command|help": CommandMeta(
        "loading stale",
        "@slow @connection",
        "",
        "server",
        "5.0.0",
        "Show helpful text about the different subcommands",
        "O(1)",
    ),
}


def is_redis_command(name: str) -> bool:
    """A command (or `container|sub`) name of Redis 7.0."""
    return name in REDIS7_COMMANDS


def unsupported(name: str) -> CommandError:
    """The refusal for a Redis 7 command we do not implement (`name` lower case, `a|b` for a
    subcommand)."""
    if REDIS7_COMMANDS.get(name) in DATA_GROUPS:
        return CommandError(errors.UNSUPPORTED_COMMAND_FMT.format(name=name))
    return CommandError(errors.UNSUPPORTED_FEATURE_FMT.format(name=name))
