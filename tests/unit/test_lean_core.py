"""The core package works without its extras: no Pydantic AI, click or rich is imported or needed.

Each case runs a fresh interpreter whose import system refuses the extras'
modules, as if only ``pip install dex-agents`` had run. The import-linter
contracts ``lean-core`` and ``lean-root`` say the same statically.
"""

import subprocess
import sys
import textwrap

from dex_agents.command import CLI_MODULES, MISSING_EXTRA

EXTRA_MODULES = ("pydantic_ai", "pydantic_graph", "click", "rich", "starlette", "uvicorn")
"""Top-level modules that only the ``pydantic-ai`` and ``cli`` extras install."""

CORE_PACKAGES = ("dex_agents.domain", "dex_agents.application", "dex_agents.infrastructure", "dex_agents.testing")
"""Everything but ``dex_agents.adapters`` (one per extra) and ``dex_agents.cli``."""

_BLOCKER = """
import importlib.abc
import sys

BLOCKED = {blocked!r}


class _WithoutExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: not installed)", name=name)
        return None


sys.meta_path.insert(0, _WithoutExtras())
"""


SCRIPT = """
from dex_agents.command import main

sys.argv = ["dex-agents", "--help"]
raise SystemExit(main())
"""
"""What the ``dex-agents`` console script runs, asking for the help text."""


def run_without(blocked: tuple[str, ...], program: str) -> subprocess.CompletedProcess[str]:
    """Run ``program`` in a fresh interpreter in which ``blocked`` modules cannot be imported."""
    source = _BLOCKER.format(blocked=set(blocked)) + textwrap.dedent(program)
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120, check=False)


def test_every_core_module_imports_without_pydantic_ai_click_or_rich() -> None:
    result = run_without(
        EXTRA_MODULES,
        f"""
        import importlib
        import pkgutil

        import dex_agents
        import dex_agents.command

        imported = ["dex_agents", "dex_agents.command"]
        for package_name in {CORE_PACKAGES!r}:
            package = importlib.import_module(package_name)
            imported.append(package_name)
            for info in pkgutil.walk_packages(package.__path__, prefix=package_name + "."):
                importlib.import_module(info.name)
                imported.append(info.name)
        leaked = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
        assert not leaked, leaked
        print(len(imported))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 50  # the walk reached every layer's modules


def test_a_runner_written_against_the_core_runs_a_turn_without_the_extras() -> None:
    result = run_without(
        EXTRA_MODULES,
        """
        import asyncio

        from dex_agents import AgentMessage, AgentUsage, FrameworkMessage, MessageRole, TurnCompleted
        from dex_agents.testing import make_turn_context


        class EchoRunner:
            def build_user_message(self, text):
                return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

            async def run_model_step(self, turn):
                said = turn.messages[-1].text
                answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=said, text=said)
                return TurnCompleted([answer], AgentUsage(model_calls=1))


        runner = EchoRunner()
        user = AgentMessage.stored(runner.build_user_message("Hi"), sequence=1, turn_id="turn-1")
        outcome = asyncio.run(runner.run_model_step(make_turn_context(messages=[user])))
        assert outcome.new_messages[0].text == "Hi", outcome
        print("ok")
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_dex_agents_script_without_the_cli_extra_says_which_extra_to_install() -> None:
    assert {"click", "rich"} <= CLI_MODULES
    result = run_without(("click", "rich"), SCRIPT)
    assert result.returncode == 1, result.stderr
    assert result.stderr == MISSING_EXTRA.format(name="click") + "\n"
    assert "pip install 'dex-agents[cli]'" in result.stderr


def test_the_dex_agents_script_starts_the_command_line_with_click_and_rich_even_without_pydantic_ai() -> None:
    result = run_without(("pydantic_ai", "pydantic_graph"), SCRIPT)
    assert result.returncode == 0, result.stderr
    assert "Usage: dex-agents" in result.stdout
