"""What `watch` accepts as typed commands, and how it refuses the rest."""

import pytest

from dex_agents.cli.errors import EXIT_USAGE, UsageError
from dex_agents.cli.watch import WatchCommand, parse_watch_command


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("approve turn-1.call-2", WatchCommand(action="approve", interrupt_id="turn-1.call-2")),
        (
            'reject turn-1.call-2 "too expensive"',
            WatchCommand(action="reject", interrupt_id="turn-1.call-2", reason="too expensive"),
        ),
        (
            "reject turn-1.call-2 too expensive",
            WatchCommand(action="reject", interrupt_id="turn-1.call-2", reason="too expensive"),
        ),
        ("reject turn-1.call-2", WatchCommand(action="reject", interrupt_id="turn-1.call-2")),
        ("  SNAPSHOT ", WatchCommand(action="snapshot")),
        ("quit", WatchCommand(action="quit")),
        ('cancel "wrong customer"', WatchCommand(action="cancel", reason="wrong customer")),
        ("cancel", WatchCommand(action="cancel")),
        ("withdraw 3f9a", WatchCommand(action="withdraw", message_id="3f9a")),
    ],
)
def test_commands_parse_into_their_action_and_arguments(line: str, command: WatchCommand) -> None:
    assert parse_watch_command(line) == command


def test_a_blank_line_is_no_command() -> None:
    assert parse_watch_command("   ") is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("aprove turn-1.call-2", "malformed command 'aprove turn-1.call-2'"),
        ("approve", "malformed command 'approve'"),
        ("approve a b", "malformed command 'approve a b'"),
        ("reject", "malformed command 'reject'"),
        ('reject x "unclosed', "No closing quotation"),
        ("quit now", "malformed command 'quit now'"),
        ("withdraw", "malformed command 'withdraw'"),
        ("withdraw a b", "malformed command 'withdraw a b'"),
    ],
)
def test_malformed_commands_are_a_usage_error_that_names_the_commands(line: str, why: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_watch_command(line)
    assert why in raised.value.message
    assert 'approve ID · reject ID "reason"' in raised.value.message
    assert raised.value.exit_code == EXIT_USAGE
