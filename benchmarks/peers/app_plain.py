"""Configuration ``plain``: Pydantic AI without durability (the floor)."""

from pydantic_ai.messages import ModelMessage

from benchmarks.peers.runners import CallerHeldHistory, Describe
from benchmarks.peers.scenario import make_agent


class PlainRunner(CallerHeldHistory):
    """``agent.run`` in the worker process; nothing is stored."""

    name = "plain"

    def __init__(self) -> None:
        super().__init__()
        self._agent = make_agent("bench_plain")

    async def run(self, prompt: str, history: list[ModelMessage]) -> tuple[list[ModelMessage], str]:
        result = await self._agent.run(prompt, message_history=history or None)
        return result.new_messages(), ""

    async def describe(self, ref: str, *, session: bool) -> Describe:
        return {"model_steps": 0, "tool_steps": 0, "recorded_steps": 0, **(self.history_info() if session else {})}
