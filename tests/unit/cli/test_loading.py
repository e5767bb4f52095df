"""Resolving MODULE:FLOW_FACTORY: every way it can go wrong is one clear message."""

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.cli.errors import EXIT_FAILURE, EXIT_USAGE, CliError
from dex_agents.cli.loading import load_flow
from dex_agents.testing import ScriptedRunner

MODULE = "cli_loading_targets"


def scripted_flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="Scripted")


@pytest.fixture(autouse=True)
def targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    (tmp_path / f"{MODULE}.py").write_text(
        "from tests.unit.cli.test_loading import scripted_flow\n"
        "FLOW = scripted_flow()\n"
        "NOT_CALLABLE = 42\n"
        "def wrong_type():\n    return 'a string'\n"
        "def broken():\n    raise RuntimeError('no model configured')\n"
    )
    (tmp_path / "cli_loading_broken.py").write_text("import a_module_that_does_not_exist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in (MODULE, "cli_loading_broken"):
        sys.modules.pop(name, None)


def test_a_factory_is_called_and_an_agent_session_flow_object_is_taken_as_it_is() -> None:
    assert load_flow("tests.unit.cli.test_loading:scripted_flow").flow.get_flow_type() == "Scripted"
    assert load_flow(f"{MODULE}:FLOW").flow.get_flow_type() == "Scripted"


def test_the_order_agent_of_the_demo_resolves() -> None:
    assert load_flow("dex_agents.cli.order_agent:build_order_flow").flow.get_flow_type() == "OrderAgent"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_xyz:build", "unknown module 'no_such_module_xyz': no module of that name can be imported"),
        (f"{MODULE}:missing", f"unknown flow factory 'missing': module '{MODULE}' has no such attribute"),
        (f"{MODULE}:NOT_CALLABLE", f"{MODULE}:NOT_CALLABLE is neither a flow factory"),
        (f"{MODULE}:wrong_type", f"flow factory {MODULE}:wrong_type returned str, not an AgentSessionFlow"),
        (f"{MODULE}:broken", f"flow factory {MODULE}:broken failed: RuntimeError: no model configured"),
        ("cli_loading_broken:x", "importing module 'cli_loading_broken' failed: No module named"),
    ],
)
def test_a_target_that_does_not_resolve_is_one_clear_error(target: str, message: str) -> None:
    with pytest.raises(CliError) as raised:
        load_flow(target)
    assert raised.value.message.startswith(message)
    assert raised.value.exit_code == EXIT_FAILURE


@pytest.mark.parametrize("target", ["just_a_module", ":factory", "module:"])
def test_a_target_without_module_and_factory_is_a_usage_error(target: str) -> None:
    with pytest.raises(CliError) as raised:
        load_flow(target)
    assert "expected MODULE:FLOW_FACTORY" in raised.value.message
    assert raised.value.exit_code == EXIT_USAGE


def test_a_model_name_whose_provider_package_is_missing_says_what_to_install() -> None:
    if importlib.util.find_spec("openai") is not None:
        pytest.skip("the openai package is installed here")
    with pytest.raises(CliError, match=r"model 'openai:gpt-5.2' needs its provider package: .*pip install"):
        load_flow("openai:gpt-5.2")
