"""The Step and effect tables of the `dex_agents` docstring, and the events table of docs/client.md, are the code."""

import re
from pathlib import Path

import dex_agents
from dex_agents.application.next import StepName
from dex_agents.application.policies import STEP_POLICIES, tool_step_name
from dex_agents.domain.events import EVENT_PAYLOAD_KEYS
from dex_agents.domain.tools import (
    ToolCallStatus,
    ToolEffect,
    default_requires_approval,
    maximum_attempts,
    status_after_exhausted_retries,
)


def table(title: str) -> list[list[str]]:
    """Return the rows of the docstring table that follows the paragraph starting with ``title``."""
    doc = dex_agents.__doc__ or ""
    start = doc.index(title)
    rows = []
    for line in doc[start:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
            if not set(cells[0]) <= {"-"}:
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def test_the_step_table_lists_every_step_with_its_attempts_and_failure_route() -> None:
    rows = table("Steps (the one table of them")
    assert [StepName(row[0]) for row in rows] == list(StepName)
    for name, _input, attempts, route in rows:
        policy = STEP_POLICIES[StepName(name)]
        assert int(re.match(r"\d+", attempts).group()) == policy.maximum_attempts  # type: ignore[union-attr]
        assert (None if route == "none" else StepName(route)) is policy.failure_route


def test_the_effect_table_is_the_effect_rules() -> None:
    rows = table("Effects (`ToolEffect`")
    assert [ToolEffect(row[0]) for row in rows] == list(ToolEffect)
    for effect_name, step, attempts, after_retries, approval in rows:
        effect = ToolEffect(effect_name)
        assert tool_step_name(effect) is StepName(step)
        assert maximum_attempts(effect) == int(attempts) == STEP_POLICIES[StepName(step)].maximum_attempts
        assert status_after_exhausted_retries(effect) is ToolCallStatus(after_retries)
        assert default_requires_approval(effect) is (approval == "yes")


def test_the_events_table_of_the_client_page_lists_every_event_type_with_its_payload_keys() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \|", text[text.index("## Events") :], re.MULTILINE)
    documented = {event: set(re.findall(r"`(\w+)`", keys)) for event, keys in rows}
    assert documented == {event.value: set(keys) for event, keys in EVENT_PAYLOAD_KEYS.items()}


def test_the_readme_links_every_docs_page() -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    assert [page.name for page in sorted((root / "docs").glob("*.md")) if f"](docs/{page.name})" not in readme] == []
