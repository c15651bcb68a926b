"""Where a request may run: Redis Cluster's `getNodeByQuery`, over a region's `Layout`.

A request runs here when all its keys hash to one slot this node serves, or when it has no
keys. Keys in more than one slot get CROSSSLOT (checked over every key before the owner, as Redis
does: a request both cross-slot and foreign is CROSSSLOT); one slot served elsewhere gets
`MOVED <slot> <ip>:<port>`. No slot ever migrates between nodes, so ASK, TRYAGAIN and the
CLUSTERDOWN errors of an unassigned slot never arise.

Inside MULTI, Redis checks each command as it is queued (a redirected command is not queued, and
the transaction is flagged so that EXEC answers EXECABORT; once flagged, later commands are
answered QUEUED but not queued either) and, at EXEC, every queued command's keys together: keys
of different slots across the queue make EXEC answer CROSSSLOT (before EXECABORT) and discard the
transaction. `redirect_command` is the first check and `redirect_exec` the second; the flagging
and discarding are the node's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

from streams import errors
from streams.cluster.layout import Layout
from streams.commands.keyspec import command_keys
from streams.errors import CommandError
from streams.slots import key_slot


def redirect(layout: Layout, keys: Iterable[bytes]) -> CommandError | None:
    """None when a request touching `keys` runs on this node, else the error to answer."""
    slot: int | None = None
    for key in keys:
        this = key_slot(key)
        if slot is None:
            slot = this
        elif this != slot:
            return CommandError(errors.CROSSSLOT)
    if slot is None:
        return None
    owner = layout.owner(slot)
    if owner.index == layout.myself:
        return None
    return errors.moved(slot, owner.ip, owner.port)


def redirect_command(layout: Layout, name: str, args: Sequence[bytes]) -> CommandError | None:
    """`redirect` for one request of command `name` (catalogue name, `container|sub`)."""
    return redirect(layout, command_keys(name, args))


def redirect_exec(
    layout: Layout, queued: Iterable[tuple[str, Sequence[bytes]]]
) -> CommandError | None:
    """`redirect` at EXEC, over the keys of every queued (name, args) together."""
    return redirect(layout, chain.from_iterable(command_keys(n, a) for n, a in queued))
