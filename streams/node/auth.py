"""Authentication: Redis's `requirepass` and ACL-style users, as AUTH and HELLO ... AUTH see them.

A node is configured with `--requirepass PASS` (the password of the `default` user) and any number
of `--user NAME:PASS`. Without either, the `default` user has no password (`nopass`): every
connection starts authenticated, `AUTH default <anything>` succeeds and `AUTH <password>` answers
Redis's "called without any password configured" error. With either, a connection starts
unauthenticated and every command but AUTH, HELLO, QUIT and RESET answers NOAUTH until it
authenticates.

Deliberate difference from Redis: when users are configured but no requirepass, the `default`
user is disabled (Redis would leave it `nopass`, i.e. leave the server open): naming users means
access is meant to be controlled. Users have no ACL rules: an authenticated user may run every
command.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field

from streams import errors
from streams.errors import CommandError
from streams.node.clients import DEFAULT_USER, Client
from streams.reply import OK, Reply


@dataclass(frozen=True)
class AuthConfig:
    """Who may connect: user name -> password (`default` is requirepass's user)."""

    passwords: dict[bytes, bytes] = field(default_factory=dict)

    @classmethod
    def build(cls, requirepass: str | None = None, users: list[str] | None = None) -> AuthConfig:
        """From the node options: `requirepass` ("" or None: none) and `NAME:PASS` users."""
        passwords: dict[bytes, bytes] = {}
        if requirepass:
            passwords[DEFAULT_USER] = requirepass.encode()
        for spec in users or []:
            name, sep, password = spec.partition(":")
            if not sep or not name or not password:
                raise ValueError(f"--user expects NAME:PASSWORD, got {spec!r}")
            if any(c.isspace() for c in name):
                raise ValueError(f"--user: a user name cannot contain spaces: {name!r}")
            if name.encode() in passwords:
                raise ValueError(f"--user: user {name!r} is configured twice")
            passwords[name.encode()] = password.encode()
        return cls(passwords)

    def credentials(self) -> tuple[bytes, bytes] | None:
        """What this node sends with AUTH to the other nodes of its region (which share its
        options): the default user's password, else the first user's; None when no password
        is required."""
        if not self.passwords:
            return None
        user = DEFAULT_USER if DEFAULT_USER in self.passwords else next(iter(self.passwords))
        return user, self.passwords[user]

    @property
    def required(self) -> bool:
        """Whether a new connection must authenticate before running commands."""
        return bool(self.passwords)

    def check(self, user: bytes, password: bytes) -> bool:
        if not self.passwords:
            return user == DEFAULT_USER  # the default user is `nopass`: any password will do
        stored = self.passwords.get(user)
        return stored is not None and hmac.compare_digest(stored, password)


def start(client: Client, config: AuthConfig) -> None:
    """A new connection (or RESET): authenticated as `default` only if no password is
    configured."""
    client.authenticated = not config.required
    client.user = DEFAULT_USER


def login(client: Client, config: AuthConfig, user: bytes, password: bytes) -> None:
    """Authenticate the connection or raise WRONGPASS (a failed attempt changes nothing)."""
    if not config.check(user, password):
        raise CommandError(errors.WRONGPASS)
    client.authenticated = True
    client.user = user


def auth(client: Client, args: list[bytes], config: AuthConfig) -> Reply:
    """AUTH [username] password."""
    if len(args) > 3:
        raise CommandError(errors.SYNTAX)
    if len(args) == 2:
        if not config.passwords:
            raise CommandError(errors.AUTH_NOT_CONFIGURED)
        login(client, config, DEFAULT_USER, args[1])
    else:
        login(client, config, args[1], args[2])
    return OK
