"""Placeholder replaced by the groups family."""

from streams.commands.base import Command

COMMANDS: list[Command] = []
