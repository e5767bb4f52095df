"""A test agent whose model, tool and arguments are full of terminal escape sequences.

The model streams `ESCAPES`, asks to ``publish`` them (a write that needs
approval, so its arguments are shown to the person answering), and the tool's
output holds them again. A terminal must show all of it as visible text.
"""

import json
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.infrastructure.dex.flow import AgentSessionFlow

ESCAPES = (
    "\x1b]0;PWNED\x1b\\ \x1b[2J\x1b[8mHIDDEN\x1b[0m \x1b]52;c;ZXZpbA==\x07 \x9b31mC1\x9b0m \u202edesrever\u202c "
    "\x1b[1A\x1b[2Kup"
)
"""Set the title, clear the screen, hide text, write the clipboard (OSC 52), a C1 CSI, a bidi override, a line up."""

RAW = ("\x1b", "\x9b", "\u202e", "\x07")
"""What must never reach the terminal as itself."""

FLOW_TYPE = "HostileAgent"


def _published(messages: list[ModelMessage]) -> bool:
    return any(
        isinstance(part, ToolReturnPart) and part.tool_name == "publish"
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    if _published(messages):
        yield "Done: " + ESCAPES
        return
    yield "About to publish " + ESCAPES
    yield {0: DeltaToolCall(name="publish", json_args=json.dumps({"text": ESCAPES}), tool_call_id="call-1")}


def build_hostile_flow() -> AgentSessionFlow:
    """The agent: text, a write needing approval whose arguments are `ESCAPES`, and its output echoing them."""
    agent: Agent[None, str] = Agent(FunctionModel(stream_function=_stream, model_name="scripted-hostile-model"))

    @agent.tool_plain
    def publish(text: str) -> str:
        """Publish a text."""
        return "published: " + text

    del publish
    policies = {"publish": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)}
    return pydantic_ai_session_flow(agent, flow_type=FLOW_TYPE, tool_policies=policies)
