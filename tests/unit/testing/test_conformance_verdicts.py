"""The conformance probe's verdict lines and exit code."""

from dex_agents.testing.conformance import Finding, Verdict, exit_code, format_finding


def test_a_finding_prints_its_verdict_assumption_and_what_was_seen() -> None:
    assert format_finding(Finding("locks hold", Verdict.HOLDS, "ignored")) == "holds: locks hold"
    assert format_finding(Finding("locks hold", Verdict.DIFFERS, "it ran")) == "differs: locks hold — it ran"
    assert format_finding(Finding("x", Verdict.UNCHECKED, "timeout")) == "could not be checked: x — timeout"


def test_the_exit_code_is_one_only_when_an_assumption_differs() -> None:
    assert exit_code([Finding("a", Verdict.HOLDS), Finding("b", Verdict.UNCHECKED)]) == 0
    assert exit_code([Finding("a", Verdict.HOLDS), Finding("b", Verdict.DIFFERS)]) == 1


def test_what_a_finding_quotes_from_the_server_is_printed_with_its_control_characters_visible() -> None:
    seen = "title\x1b]0;PWNED\x07 clear\x1b[2J csi\x9b bidi\u202e"
    line = format_finding(Finding("errors", Verdict.DIFFERS, seen))
    assert line == "differs: errors — title␛]0;PWNED␇ clear␛[2J csi\\x9b bidi\\u202e"
