"""Placeholder replaced by the info family."""

from streams.commands.base import Command

COMMANDS: list[Command] = []
