"""Authentication: Redis's `requirepass` and ACL-style users, as AUTH and HELLO ... AUTH see them.

A node is configured with `--requirepass PASS` (the password of the `default` user) and any number
of `--user NAME:PASS[:RULES]`. Without either, the `default` user has no password (`nopass`): every
connection starts authenticated, `AUTH default <anything>` succeeds and `AUTH <password>` answers
Redis's "called without any password configured" error. With either, a connection starts
unauthenticated and every command but AUTH, HELLO, QUIT and RESET answers NOAUTH until it
authenticates.

Deliberate difference from Redis: when users are configured but no requirepass, the `default`
user is disabled (Redis would leave it `nopass`, i.e. leave the server open): naming users means
access is meant to be controlled.

ACL rules, Redis's syntax for commands (`Rules`): a user given rules (`--user
reader:pw:+@read -@dangerous`) may run only what they allow, and is refused with Redis's NOPERM
text otherwise; so admin commands (CRDT.*, FLUSHALL, CONFIG, CLIENT, ...) can be withheld from
the users of applications. A user given no rules, and `default`, may run every command (as
before). Key patterns (`~pattern`) are not supported: every user reaches every key.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field

from streams import errors
from streams.commands.base import Command
from streams.errors import CommandError
from streams.node.pipeline.clients import DEFAULT_USER, Client
from streams.reply import OK, Reply

NOPERM_FMT = "NOPERM this user has no permissions to run the '{name}' command"
"""Redis 7.0's refusal (`name`: the command, or `container|sub`)."""

_RULE = re.compile(r"[+-](@[a-z-]+|[a-z0-9._-]+(\|[a-z0-9._-]+)?)")
_ALL = frozenset({"allcommands", "nocommands", "+@all", "-@all"})


@dataclass(frozen=True)
class Rules:
    """A user's command rules in Redis's ACL syntax, applied in order, the last one that matches
    a command deciding: `+@category` / `-@category` (the command's ACL categories, as COMMAND
    INFO lists them), `+name` / `-name` (a command with all its subcommands), `+name|sub`,
    `allcommands` (`+@all`) and `nocommands` (`-@all`). A user with rules starts with none
    allowed, as a new Redis user does. Commands that need no authentication (AUTH, HELLO, QUIT,
    RESET) are always allowed, as in Redis."""

    rules: tuple[tuple[bool, str], ...]
    """(allow, what): what is "@all", "@category", "name" or "name|sub"."""
    _decided: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> Rules:
        """Rules separated by spaces; ValueError naming the first that is not one."""
        rules: list[tuple[bool, str]] = []
        for word in text.split():
            rule = word.lower()
            if rule in _ALL:
                rules.append((rule in ("allcommands", "+@all"), "@all"))
            elif _RULE.fullmatch(rule):
                rules.append((rule[0] == "+", rule[1:]))
            else:
                raise ValueError(
                    f"{word!r} is not an ACL command rule (+@category, -@category, +command, "
                    "-command, +command|subcommand, allcommands, nocommands)"
                )
        return cls(tuple(rules))

    def allows(self, cmd: Command) -> bool:
        if "no_auth" in cmd.flags:
            return True
        decided = self._decided.get(cmd.name)
        if decided is None:
            decided = self._decided[cmd.name] = self._decide(cmd)
        return decided

    def _decide(self, cmd: Command) -> bool:
        top = cmd.name.partition("|")[0]
        allowed = False
        for allow, what in self.rules:
            if what == "@all" or what in cmd.spec.acl or what in (cmd.name, top):
                allowed = allow
        return allowed


def _looks_like_rules(text: str) -> bool:
    words = text.split()
    return bool(words) and all(w.lower() in _ALL or w[:1] in "+-" for w in words)


@dataclass(frozen=True)
class AuthConfig:
    """Who may connect: user name -> password (`default` is requirepass's user), and the
    command rules of the users given some (`Rules`; the others may run every command)."""

    passwords: dict[bytes, bytes] = field(default_factory=dict)
    rules: dict[bytes, Rules] = field(default_factory=dict)

    @classmethod
    def build(cls, requirepass: str | None = None, users: list[str] | None = None) -> AuthConfig:
        """From the node options: `requirepass` ("" or None: none) and `NAME:PASS[:RULES]`
        users (a password may hold ':'; the text after the last ':' is rules if it reads as
        rules: words starting with + or -, or allcommands / nocommands)."""
        passwords: dict[bytes, bytes] = {}
        rules: dict[bytes, Rules] = {}
        if requirepass:
            passwords[DEFAULT_USER] = requirepass.encode()
        for spec in users or []:
            name, sep, password = spec.partition(":")
            head, colon, tail = password.rpartition(":")
            user_rules = None
            if colon and _looks_like_rules(tail):
                password, user_rules = head, Rules.parse(tail)
            if not sep or not name or not password:
                raise ValueError(f"--user expects NAME:PASSWORD[:RULES], got {spec!r}")
            if any(c.isspace() for c in name):
                raise ValueError(f"--user: a user name cannot contain spaces: {name!r}")
            if name.encode() in passwords:
                raise ValueError(f"--user: user {name!r} is configured twice")
            passwords[name.encode()] = password.encode()
            if user_rules is not None:
                rules[name.encode()] = user_rules
        return cls(passwords, rules)

    def allows(self, user: bytes, cmd: Command) -> bool:
        """Whether `user` may run `cmd` (its rules; a user without rules may run anything)."""
        rules = self.rules.get(user)
        return rules is None or rules.allows(cmd)

    def credentials(self) -> tuple[bytes, bytes] | None:
        """What this node sends with AUTH to the other nodes of its region (which share its
        options): the default user's password, else the first user's; None when no password
        is required."""
        if not self.passwords:
            return None
        unlimited = [u for u in self.passwords if u not in self.rules]
        if not unlimited:
            raise ValueError(
                "no user may run every command: the nodes could not talk to each other"
            )
        user = DEFAULT_USER if DEFAULT_USER in unlimited else unlimited[0]
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
