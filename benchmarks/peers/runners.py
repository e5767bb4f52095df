"""What every configuration implements, so `benchmarks.peers.worker` can drive it."""

import abc
import argparse
import time
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

Describe = dict[str, Any]
"""What a runner recorded for one turn or session (its engine's own step counts, sizes)."""


class Runner(abc.ABC):
    """One configuration: a fresh turn, a turn of the current session, and what the engine recorded.

    A *turn* is measured from "user message sent" until the runner knows the turn ended:
    ``agent.run`` returned (plain, DBOS, Temporal), or ``turn_completed`` arrived on the live
    event stream (dex-agents).
    """

    name = ""

    async def start(self, args: argparse.Namespace) -> None:  # noqa: B027 - an optional hook: nothing to do by default
        """Start the engine (excluded from every measurement)."""

    @abc.abstractmethod
    async def fresh_turn(self, prompt: str) -> str:
        """Run one turn of a new session; return the reference `describe` takes."""

    @abc.abstractmethod
    async def session_turn(self, prompt: str) -> str:
        """Run the next turn of the current session (the first one starts it); return a reference."""

    def reset_session(self) -> None:  # noqa: B027 - an optional hook: nothing to do by default
        """Forget the current session: the next `session_turn` starts a new one."""

    @abc.abstractmethod
    async def describe(self, ref: str, *, session: bool) -> Describe:
        """Return what the engine recorded for ``ref`` (a turn, or the session so far)."""

    def cpu_marks(self) -> dict[str, float]:
        """Exact CPU seconds so far of the child processes this runner owns, by role."""
        return {}

    def pids(self) -> dict[str, int]:
        """Process IDs of the child processes this runner owns, by role."""
        return {}

    def memory(self) -> dict[str, dict[str, int]]:
        """``{role: {"VmHWM": KiB, "VmRSS": KiB}}`` of the child processes this runner owns."""
        return {}

    async def stop(self) -> None:  # noqa: B027 - an optional hook: nothing to do by default
        """Stop the engine and every child process the runner started."""


class CallerHeldHistory(Runner):
    """A runner whose caller keeps the message history and passes it to each turn (the peers)."""

    def __init__(self) -> None:
        self.history: list[ModelMessage] = []

    @abc.abstractmethod
    async def run(self, prompt: str, history: list[ModelMessage]) -> tuple[list[ModelMessage], str]:
        """Run one ``agent.run``; return its new messages and the engine's run reference."""

    async def fresh_turn(self, prompt: str) -> str:
        _, ref = await self.run(prompt, [])
        return ref

    async def session_turn(self, prompt: str) -> str:
        new, ref = await self.run(prompt, self.history)
        self.history = [*self.history, *new]
        return ref

    def reset_session(self) -> None:
        self.history = []

    def history_info(self) -> Describe:
        """The caller-held history's size."""
        return {
            "history_messages": len(self.history),
            "history_json_bytes": len(ModelMessagesTypeAdapter.dump_json(self.history)),
        }


def now() -> float:
    """The wall clock used for every span."""
    return time.perf_counter()
