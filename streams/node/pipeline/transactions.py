"""MULTI / EXEC / DISCARD: the per-connection queue and Redis 7.0's rules for it.

Between MULTI and EXEC every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is queued and
answered `+QUEUED`. A command refused at queue time (unknown command or subcommand, wrong number
of arguments, a Redis command this database does not implement, a command not allowed in a
transaction) is answered with its error and marks the transaction: EXEC then answers EXECABORT and
runs nothing. EXEC with a wrong number of arguments aborts the transaction at once, naming the
reason, as Redis does. Errors that happen while a queued command runs are returned inside EXEC's
array; the other commands still run.

The pipeline runs the queue (`streams.node.pipeline.dispatch.Dispatcher.exec_transaction`) in one
go on its event loop, nothing awaiting in between, so no command of another client and no op from
another region is applied in between.
The queue holds the commands as resolved when they were queued: EXEC does not look them up again.

WATCH is not supported: regions accept writes concurrently, so a check-and-set over one region's
view would promise an isolation the database cannot give. WATCH answers a clear error; UNWATCH is
accepted (nothing is ever watched).
"""

from __future__ import annotations

from streams import errors
from streams.errors import CommandError
from streams.node.pipeline.clients import Client, Transaction
from streams.reply import OK, Reply

IMMEDIATE = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
"""Commands that run at once even inside MULTI (Redis's processCommand exceptions)."""


def multi(client: Client, args: list[bytes]) -> Reply:
    if client.transaction is not None:
        raise CommandError(errors.MULTI_NESTED)
    client.transaction = Transaction()
    return OK


def discard(client: Client, args: list[bytes]) -> Reply:
    if client.transaction is None:
        raise CommandError(errors.DISCARD_WITHOUT_MULTI)
    client.transaction = None
    return OK


def take(client: Client) -> Transaction:
    """EXEC: end the transaction and hand over its queue, or raise the reason it cannot run."""
    tx, client.transaction = client.transaction, None
    if tx is None:
        raise CommandError(errors.EXEC_WITHOUT_MULTI)
    if tx.dirty:
        raise CommandError(errors.EXECABORT)
    return tx


def reject(client: Client, name: bytes, error: CommandError) -> CommandError:
    """A command refused before it could run or be queued (unknown, wrong arity): inside MULTI it
    dooms the transaction, and a refused EXEC aborts it, naming the reason."""
    tx = client.transaction
    if tx is None:
        return error
    if name == b"exec":
        client.transaction = None
        reason = error.text.split(" ", 1)[1] if error.code == "ERR" else error.text
        return CommandError(errors.EXECABORT_BECAUSE_FMT.format(reason=reason))
    tx.dirty = True
    return error


def watch(client: Client, args: list[bytes]) -> Reply:
    if client.transaction is not None:
        raise CommandError(errors.WATCH_INSIDE_MULTI)
    raise CommandError(errors.WATCH_UNSUPPORTED)


def unwatch(client: Client, args: list[bytes]) -> Reply:
    return OK
