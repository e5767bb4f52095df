"""`dex-agents demo --framework`: the default Pydantic AI agent, and a clear refusal where sagent cannot run."""

import importlib.util
import sys

import pytest
from click.testing import CliRunner

from dex_agents.cli.app import cli
from dex_agents.cli.demo import load_order_flow, sagent_unavailable
from dex_agents.cli.errors import CliError

SAGENT_RUNS_HERE = sys.version_info >= (3, 13) and importlib.util.find_spec("sagent") is not None


def test_the_default_framework_is_the_pydantic_ai_order_agent() -> None:
    assert load_order_flow("pydantic-ai").get_flow_type() == "OrderAgent"


@pytest.mark.skipif(SAGENT_RUNS_HERE, reason="sagent runs here: tests/sagent runs the sagent demo")
def test_the_sagent_demo_outside_python_3_13_fails_with_what_it_needs() -> None:
    problem = sagent_unavailable()
    assert problem is not None
    assert "Python 3.13" in problem
    assert "dex-agents[sagent]" in problem
    with pytest.raises(CliError, match=r"needs sagent 0\.1\.20"):
        load_order_flow("sagent")
    result = CliRunner().invoke(cli, ["demo", "--framework", "sagent", "--yes"], standalone_mode=False)
    assert result.return_value != 0
    assert "needs sagent 0.1.20" in result.output


def test_an_unknown_framework_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["demo", "--framework", "langchain"])
    assert result.exit_code == 2
    assert "langchain" in result.output
