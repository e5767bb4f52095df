"""Calls waiting for their result from outside, answered through the console's form and the public client.

One Pydantic AI agent on the dev server: an ``ExternalToolset`` tool (answered
with the console's result form, CSRF and all) and a tool raising
``CallDeferred`` (answered with `AgentSessionClient.submit_tool_result`). The
model sees each answer as a plain run resumed with ``DeferredToolResults``
would give it.
"""

import re
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

import pytest
from pydantic_ai import Agent, CallDeferred, DeferredToolRequests, ExternalToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from dex_agents.domain.errors import InvalidInputError, ToolResultAlreadySubmittedError, UnknownToolCallError
from dex_agents.domain.interrupts import EXPIRED_RESULT_MESSAGE, InterruptKind
from dex_agents.domain.tools import ToolCallStatus, ToolEffect
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.testing import wait_until
from tests.integration.console.page_agent import build_page_flow
from tests.integration.console.support import AppStack, app_stack, asgi_request

pytestmark = pytest.mark.integration

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        return ModelResponse(parts=[TextPart(repr([(p.outcome, p.content) for p in returns]))])
    prompts = [p.content for p in last.parts if isinstance(p, UserPromptPart)] if isinstance(last, ModelRequest) else []
    prompt = str(prompts[-1]) if prompts else ""
    tool = "start_job" if "job" in prompt else "inventory"
    return ModelResponse(parts=[ToolCallPart(tool, {"sku": "A-7"}, tool_call_id="c1")])


def build_flow(*, deadline: timedelta | None = None) -> AgentSessionFlow:
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
    inventory = ExternalToolset([ToolDefinition(name="inventory", parameters_json_schema=schema)])
    agent = Agent(FunctionModel(_respond), output_type=[str, DeferredToolRequests], toolsets=[inventory])

    @agent.tool_plain
    def start_job(sku: str) -> str:
        raise CallDeferred

    return pydantic_ai_session_flow(
        agent,
        flow_type="ExternalResults" if deadline is None else "ExternalResultsWithDeadline",
        default_tool_effect=ToolEffect.READ,
        external_result_deadline=deadline,
    )


async def _waiting(sessions: AgentSessionClient, session_id: str) -> AgentSnapshot:
    async def probe() -> AgentSnapshot | None:
        snapshot = await sessions.get_agent_snapshot(session_id)
        return snapshot if snapshot.pending_interrupts else None

    return await wait_until("the call to wait for its result", probe, timeout=60)


async def _post(stack: AppStack, target: str, fields: dict[str, str]) -> tuple[int, str]:
    answer = await asgi_request(stack.app, "POST", target, headers=FORM, body=urlencode(fields).encode())
    return answer.status, dict(answer.headers).get("location", "")


async def test_an_external_call_is_answered_through_the_console_and_a_deferred_one_through_the_client(
    tmp_path: Path,
) -> None:
    async with app_stack(build_flow(), build_page_flow(), tmp_path) as stack:
        sessions = stack.sessions
        await sessions.start_session("ext-1", "how many A-7?")
        snapshot = await _waiting(sessions, "ext-1")
        (interrupt,) = snapshot.pending_interrupts
        assert (interrupt.kind, interrupt.tool_name) == (InterruptKind.TOOL_RESULT, "inventory")

        page = (await asgi_request(stack.app, "GET", "/sessions/ext-1")).text
        assert 'action="/sessions/ext-1/results"' in page
        assert '<input type="hidden" name="tool_call_id" value="c1">' in page
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert match is not None
        csrf = match.group(1)
        # No CSRF token, or JSON that does not parse: refused, and the call still waits.
        assert (await _post(stack, "/sessions/ext-1/results", {"tool_call_id": "c1", "result": "1"}))[0] == 403
        bad = {"csrf": csrf, "tool_call_id": "c1", "result": "{not json"}
        assert (await _post(stack, "/sessions/ext-1/results", bad))[0] == 400
        good = {"csrf": csrf, "tool_call_id": "c1", "result": '{"stock": 3}', "return_to": "/approvals"}
        assert await _post(stack, "/sessions/ext-1/results", good) == (303, "/approvals?notice=result-sent")
        done = await sessions.wait_until_idle("ext-1", timeout=60)
        assert done.messages[-1].text == repr([("success", {"stock": 3})])
        again = await _post(stack, "/sessions/ext-1/results", good)
        assert again == (303, "/approvals?notice=result-not-waiting")

        await sessions.start_session("job-1", "run the job")
        await _waiting(sessions, "job-1")
        with pytest.raises(InvalidInputError):
            await sessions.submit_tool_result("job-1", "c1", result=cast(Any, {1, 2}))  # a set has no JSON form
        with pytest.raises(UnknownToolCallError):
            await sessions.submit_tool_result("job-1", "c9", result=1)
        await sessions.submit_tool_result("job-1", "c1", error="the job queue is full")
        # A second answer is refused: as already given while the turn waits on, or (once the turn went on with the
        # first one, which a quiet machine can do before this line) as no longer a call of the active turn.
        with pytest.raises((ToolResultAlreadySubmittedError, UnknownToolCallError)):
            await sessions.submit_tool_result("job-1", "c1", result=1)
        done = await sessions.wait_until_idle("job-1", timeout=60)
        assert done.messages[-1].text == repr([("retried", "the job queue is full")])


async def test_a_result_nobody_submits_before_the_engines_deadline_expires_the_call(tmp_path: Path) -> None:
    async with app_stack(build_flow(deadline=timedelta(seconds=1)), build_page_flow(), tmp_path) as stack:
        sessions = stack.sessions
        await sessions.start_session("late-1", "how many A-7?")
        (interrupt,) = (await _waiting(sessions, "late-1")).pending_interrupts
        assert interrupt.deadline is not None

        done = await sessions.wait_until_idle("late-1", timeout=60)

        assert done.messages[-1].text == repr([("denied", EXPIRED_RESULT_MESSAGE)])
        outcome = done.messages[-2].tool_outcomes[0]
        assert (outcome.status, outcome.rejection_message) == (ToolCallStatus.EXPIRED, EXPIRED_RESULT_MESSAGE)
        with pytest.raises(UnknownToolCallError):  # the turn ended
            await sessions.submit_tool_result("late-1", "c1", result=1)
