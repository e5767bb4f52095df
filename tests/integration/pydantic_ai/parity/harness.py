"""The parity harness: one scenario, run plainly (``agent.run``) and as a session on the dev server, compared.

A scenario is one function ``build(probe) -> Scenario`` registered on a
`ScenarioSet` (``@SCENARIOS.scenario()``): it builds its agent on the probe's
model (``probe.model(respond)``) with the probe's capabilities, lists the
turns' prompts, and says how approvals are answered. `ScenarioSet.cases` makes
one test case per scenario and variant:

- ``durable``: every model and tool Step is a new agent run (``live_runs=False``,
  ``direct_tool_calls=False``);
- ``fast``: the defaults (live runs and the direct tool path, where the agent allows them);
- ``events``: the agent also carries the probe's event recorder (it then streams its runs,
  which rules out both speed paths), and the events are compared too.

`ParityStack` serves every case's Flow from one dev server and one in-process
Worker for the whole module. `check_parity` runs a case both ways and
compares, field by field, the `Observation` of each: what every model request
saw, the stored history (the session's decoded ``framework_item``s, a turn's
stored opening request standing for its user message as the runner replays
it), the usage, the tool invocations, each turn's error, the final replies and,
for ``events``, the events an event stream handler saw.
"""

import asyncio
import contextlib
import difflib
import os
import pprint
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import dex
import pytest
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ModelMessagesTypeAdapter, ModelRetry, ToolDenied
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents import AgentSessionClient, AgentSessionFlow, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from dex_agents.adapters.pydantic_ai._direct_tool import plain_agent
from dex_agents.adapters.pydantic_ai._live_runs import live_runs_possible
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.snapshot import turn_result
from dex_agents.infrastructure.dex.container import (
    AgentContainer,
    WorkerMode,
    free_listen_address,
    wait_worker_serving,
)
from dex_agents.testing.devserver import TEST_RETRY_DELAY_SCALE, DevServer, DevServerConfig
from tests.integration.pydantic_ai.parity.probe import Probe, normalize, normalize_messages, sorted_result_events

Decision = bool | str
"""How a call asking for approval is answered: ``True`` approves, ``False`` denies, a string denies with it."""


@dataclass(frozen=True)
class ExternalError:
    """An external call answered with an error: ``ModelRetry(message)`` in a plain run, ``error=`` in a session."""

    message: str


External = Callable[[ToolCallPart], object]
"""How a call whose result comes from outside is answered: its JSON value, or an `ExternalError`."""


def _no_external(call: ToolCallPart) -> object:
    raise AssertionError(f"the scenario cannot answer the external call {call}")


VARIANTS = ("durable", "fast", "events")
"""Every scenario runs in each (see the module docstring)."""

DIFF_LINES = int(os.environ.get("PARITY_DIFF_LINES", "80"))
"""How many lines of a difference a failure shows (``PARITY_DIFF_LINES``, when debugging a scenario)."""

DIFF_CONTEXT = int(os.environ.get("PARITY_DIFF_CONTEXT", "2"))
"""How many unchanged lines surround each changed one in a failure (``PARITY_DIFF_CONTEXT``)."""

TURN_TIMEOUT = 60.0
"""Seconds one session turn may take."""

_POLL = timedelta(seconds=1)
"""How long one wait for the session's next event lasts before the snapshot is read again."""


@dataclass
class Scenario:
    """What one scenario runs: an agent, the prompts of its turns, and how approvals are answered."""

    agent: AbstractAgent[Any, Any]
    """The agent, built on the probe's model with the probe's capabilities."""
    turns: Sequence[str]
    """Each turn's user prompt."""
    deps: object = None
    """The agent's deps: given to the plain run, and returned by the session's ``deps_factory``."""
    fresh_deps: Callable[[], object] | None = None
    """Deps the tools change (instead of ``deps``): one new value for the plain run's turns, and one per
    session (the session's ``deps_factory`` returns the same value to every Step of the session)."""
    decide: Callable[[ToolCallPart], Decision] = field(default=lambda _call: True)
    """How each call that asks for approval is answered (in the plain run and in the session)."""
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    """The session's tool policies; tools without one are reads (no approval, retried on a Step failure)."""
    ordered_invocations: bool = False
    """Compare tool invocations in order (by default as a multiset: parallel calls run in any order)."""
    model: Model | None = None
    """The model to run instead of the agent's own (``agent.run(model=...)``; the Flow's ``model=``)."""
    external: External = field(default=_no_external)
    """How each call whose result comes from outside (an external tool, ``CallDeferred``) is answered:
    ``DeferredToolResults.calls`` in the plain run, ``submit_tool_result`` in the session."""
    usage_limits: UsageLimits | None = None
    """Each turn's limits: every run of a plain turn (``agent.run(usage_limits=...)``), the Flow's ``usage_limits``."""


Build = Callable[[Probe], Scenario]


@dataclass(frozen=True)
class Case:
    """One scenario in one variant."""

    name: str
    variant: str
    build: Build

    @property
    def id(self) -> str:
        return f"{self.name}-{self.variant}"

    @property
    def flow_type(self) -> str:
        return "Parity" + "".join(part.title() for part in self.id.replace("-", "_").split("_"))


@dataclass
class _Registered:
    build: Build
    xfail: Mapping[str, str]


class ScenarioSet:
    """The scenarios of one test module, built once (agents, probes and Flows) for every variant that applies."""

    def __init__(self) -> None:
        self._registered: dict[str, _Registered] = {}
        self._built: dict[str, Built] | None = None

    def scenario(self, *, xfail: str | Mapping[str, str] | None = None) -> Callable[[Build], Build]:
        """Register ``build`` under its function name.

        ``xfail`` marks cases expected to fail (strictly): a reason for every variant, or reasons by variant.
        """

        def register(build: Build) -> Build:
            reasons = dict.fromkeys(VARIANTS, xfail) if isinstance(xfail, str) else dict(xfail or {})
            self._registered[build.__name__] = _Registered(build, reasons)
            return build

        return register

    def built(self) -> dict[str, "Built"]:
        """Every case, built: a ``fast`` case only when the agent can take a speed path (else it is ``durable``)."""
        if self._built is None:
            built: dict[str, Built] = {}
            for name, entry in self._registered.items():
                for variant in VARIANTS:
                    case = build_case(Case(name, variant, entry.build))
                    if variant == "fast" and not _takes_a_speed_path(case.scenario.agent):
                        continue
                    built[case.case.id] = case
            self._built = built
        return self._built

    def params(self) -> list[Any]:
        """Every built case as a ``pytest.param``, with the registered ``xfail`` marks."""
        params = []
        for built in self.built().values():
            case = built.case
            reason = self._registered[case.name].xfail.get(case.variant)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(case, id=case.id, marks=marks))
        return params


def _takes_a_speed_path(agent: AbstractAgent[Any, Any]) -> bool:
    return plain_agent(agent) or live_runs_possible(agent)


@dataclass
class Built:
    """A case's scenario, probe and Flow."""

    case: Case
    probe: Probe
    scenario: Scenario
    flow: AgentSessionFlow


def build_case(case: Case) -> Built:
    """Build a case's agent, probe and session Flow."""
    probe = Probe(watch_events=case.variant == "events")
    scenario = case.build(probe)
    deps = scenario.deps
    fast = case.variant != "durable"
    deps_factory: Callable[[str], object] | None = None if deps is None else (lambda _session_id: deps)
    if scenario.fresh_deps is not None:
        fresh, per_session = scenario.fresh_deps, dict[str, object]()

        def deps_factory(session_id: str) -> object:
            if session_id not in per_session:
                per_session[session_id] = fresh()
            return per_session[session_id]

    flow = pydantic_ai_session_flow(
        scenario.agent,
        flow_type=case.flow_type,
        tool_policies=scenario.tool_policies,
        default_tool_effect=ToolEffect.READ,
        deps_factory=deps_factory,
        model=scenario.model,
        usage_limits=scenario.usage_limits,
        live_runs=fast,
        direct_tool_calls=fast,
    )
    return Built(case=case, probe=probe, scenario=scenario, flow=flow)


class ParityStack:
    """One dev server and one in-process Worker serving every case's Flow."""

    def __init__(self, scenarios: ScenarioSet) -> None:
        self.built = scenarios.built()
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None

    async def __aenter__(self) -> "ParityStack":
        config = DevServerConfig(retry_delay_scale=TEST_RETRY_DELAY_SCALE)
        server = await self._stack.enter_async_context(DevServer(config))
        cache = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="dex-agents-parity-"))
        container = AgentContainer.build(
            flows=[built.flow for built in self.built.values()],
            server_address=server.address,
            blob_cache_directory=cache,
            max_concurrent_tasks=32,
            stop_drain_seconds=1,
            worker_mode=WorkerMode.LISTEN,
            listen_address=free_listen_address(),
        )
        worker, client = container.worker(), container.client()
        serving = asyncio.create_task(worker.start())
        await wait_worker_serving(worker, serving)

        async def stop() -> None:
            await worker.stop()
            await serving
            await client.close()
            container.blob_cache().close()

        self._stack.push_async_callback(stop)
        self._client = client
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    def sessions(self, built: Built) -> AgentSessionClient:
        return AgentSessionClient(self._client, built.flow)


@dataclass
class Observation:
    """What one run of a scenario did, as plain data."""

    requests: list[Any]
    history: list[Any]
    usage: Any
    invocations: list[Any]
    errors: list[str | None]
    replies: list[str | None]
    events: list[Any]


async def run_plain(built: Built) -> Observation:
    """Run the scenario's turns with ``agent.run``, answering approvals as the scenario decides."""
    scenario, probe = built.scenario, built.probe
    probe.reset()
    history: list[ModelMessage] = []
    usage = RunUsage()
    errors: list[str | None] = []
    replies: list[str | None] = []
    deps = scenario.deps if scenario.fresh_deps is None else scenario.fresh_deps()
    for prompt in scenario.turns:
        messages = list(history)
        user_prompt: str | None = prompt
        results: DeferredToolResults | None = None
        # Given to every run of the turn, so a run that raises still shows what it used (a session counts it).
        turn_usage = RunUsage()
        try:
            while True:
                result = await scenario.agent.run(
                    user_prompt,
                    message_history=messages,
                    deferred_tool_results=results,
                    deps=deps,
                    model=scenario.model,
                    usage=turn_usage,
                    usage_limits=scenario.usage_limits,
                )
                messages = result.all_messages()
                if not isinstance(result.output, DeferredToolRequests):
                    break
                user_prompt, results = None, _answers(result.output, scenario.decide, scenario.external)
        except Exception as error:  # noqa: BLE001 - a failed turn is an observation
            usage = usage + turn_usage
            errors.append(f"{type(error).__name__}: {error}")
            replies.append(None)
            continue
        usage = usage + turn_usage
        # As it would be stored: a session's history is JSON, read back (a datetime return reads as its string).
        history = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
        errors.append(None)
        replies.append(_reply(messages))
    return Observation(
        requests=list(probe.requests),
        history=normalize_messages(history),
        usage=_usage(usage),
        invocations=_invocations(probe, scenario),
        errors=errors,
        replies=replies,
        events=sorted_result_events(probe.events),
    )


def _answers(
    requests: DeferredToolRequests, decide: Callable[[ToolCallPart], Decision], external: External
) -> DeferredToolResults:
    calls: dict[str, Any] = {}
    for call in requests.calls:
        answer = external(call)
        calls[call.tool_call_id] = ModelRetry(answer.message) if isinstance(answer, ExternalError) else answer
    approvals: dict[str, Any] = {}
    for call in requests.approvals:
        decision = decide(call)
        approvals[call.tool_call_id] = decision if isinstance(decision, bool) else ToolDenied(decision)
    return DeferredToolResults(calls=calls, approvals=approvals)


def _reply(messages: Sequence[ModelMessage]) -> str | None:
    last = messages[-1] if messages else None
    return last.text if isinstance(last, ModelResponse) else None


def _usage(usage: RunUsage) -> Any:
    return {
        "model_calls": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cache_read_tokens,
        "reasoning_tokens": usage.output_reasoning_tokens,
    }


def _invocations(probe: Probe, scenario: Scenario) -> list[Any]:
    invocations = list(probe.invocations)
    return invocations if scenario.ordered_invocations else sorted(invocations, key=repr)


_session_numbers = iter(range(1, 1_000_000))


async def run_session(stack: ParityStack, built: Built) -> Observation:
    """Run the scenario's turns as one session on the stack, answering approvals as the scenario decides."""
    scenario, probe = built.scenario, built.probe
    probe.reset()
    sessions = stack.sessions(built)
    session_id = f"parity-{next(_session_numbers)}"
    await sessions.start_session(session_id)
    errors: list[str | None] = []
    replies: list[str | None] = []
    for prompt in scenario.turns:
        token = await sessions.latest_resume_token(session_id)
        receipt = await sessions.submit_user_message(session_id, prompt)
        turn_id = None
        async with asyncio.timeout(TURN_TIMEOUT):
            while True:
                snapshot = await sessions.get_agent_snapshot(session_id)
                for interrupt in snapshot.pending_interrupts:
                    call = ToolCallPart(interrupt.tool_name, interrupt.arguments, tool_call_id=interrupt.tool_call_id)
                    if interrupt.kind is InterruptKind.TOOL_RESULT:
                        await _submit(sessions, session_id, call, scenario.external(call))
                        continue
                    decision = scenario.decide(call)
                    await sessions.resolve_interrupt(
                        session_id,
                        interrupt.interrupt_id,
                        approved=decision is True,
                        rejection_message=None if isinstance(decision, bool) else decision,
                    )
                if turn_id is None:
                    turn_id = await sessions.find_turn(receipt)
                if turn_id is not None and turn_result(snapshot, turn_id) is not None:
                    break
                with contextlib.suppress(dex.LongPollTimeoutError):
                    token = (await sessions.read_agent_event(session_id, token, long_poll=_POLL)).resume_token
        result = await sessions.wait_for_turn(session_id, turn_id, timeout=TURN_TIMEOUT)
        errors.append(result.error)
        replies.append(result.reply if result.error is None else None)
    snapshot = await sessions.wait_until_idle(session_id, timeout=TURN_TIMEOUT)
    stored = await _all_messages(sessions, session_id)
    usage = snapshot.usage
    return Observation(
        requests=list(probe.requests),
        history=normalize_messages(replayed(stored)),
        usage={
            "model_calls": usage.model_calls,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        },
        invocations=_invocations(probe, scenario),
        errors=errors,
        replies=replies,
        events=sorted_result_events(probe.events),
    )


async def _submit(sessions: AgentSessionClient, session_id: str, call: ToolCallPart, answer: object) -> None:
    if isinstance(answer, ExternalError):
        await sessions.submit_tool_result(session_id, call.tool_call_id, error=answer.message)
    else:
        await sessions.submit_tool_result(session_id, call.tool_call_id, result=cast(JsonValue, answer))


async def _all_messages(sessions: AgentSessionClient, session_id: str) -> list[AgentMessage]:
    messages: list[AgentMessage] = []
    cursor: int | None = 0
    while cursor is not None:
        page = await sessions.list_agent_messages(session_id, after_sequence=cursor, limit=200)
        messages.extend(page.messages)
        cursor = page.next_after_sequence
    return messages


def replayed(stored: Sequence[AgentMessage]) -> list[ModelMessage]:
    """The Pydantic AI history of a session's stored messages, as the runner replays it.

    A completed turn whose second message is a request holding a user prompt and no display text
    stored its opening request there: it stands for the turn's user message. A failed turn (only
    user messages) is left out, as a plain run that raised leaves nothing in its history.
    """
    kept: list[ModelMessage] = []
    by_turn: dict[str, list[AgentMessage]] = {}
    for message in stored:
        by_turn.setdefault(message.turn_id, []).append(message)
    for turn in by_turn.values():
        if all(message.role is MessageRole.USER and message.text is not None for message in turn):
            continue  # a failed turn: its prompt and the turn-failure note
        loaded = [ModelMessagesTypeAdapter.validate_json(message.framework_item)[0] for message in turn]
        if len(turn) >= 2 and turn[1].role is MessageRole.USER and turn[1].text is None and _holds_prompt(loaded[1]):
            loaded = loaded[1:]
        kept.extend(loaded)
    return kept


def _holds_prompt(message: ModelMessage) -> bool:
    from pydantic_ai.messages import UserPromptPart

    return isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts)


async def check_parity(stack: ParityStack, case: Case) -> None:
    """Run ``case`` plainly and as a session, and assert every observation is the same."""
    built = stack.built[case.id]
    plain = await run_plain(built)
    session = await run_session(stack, built)
    compared = ["errors", "replies", "requests", "history", "invocations", "usage"]
    if case.variant == "events":
        compared.append("events")
    for plain_error, session_error in zip(plain.errors, session.errors, strict=True):
        # A plain run raises; the session's turn fails with that error in its own words around it.
        assert (plain_error is None) == (session_error is None), f"{case.id}: {plain_error!r} vs {session_error!r}"
        if plain_error is not None and session_error is not None:
            assert plain_error.split(": ", 1)[-1] in session_error, f"{case.id}: {plain_error!r} vs {session_error!r}"
    for name in compared[1:]:
        theirs, ours = normalize(getattr(plain, name)), normalize(getattr(session, name))
        assert ours == theirs, f"{case.id}: {name} differ (- plain run, + session):\n{_diff(theirs, ours)}"


def _diff(plain: Any, session: Any) -> str:
    lines = difflib.unified_diff(
        pprint.pformat(plain, width=120).splitlines(),
        pprint.pformat(session, width=120).splitlines(),
        lineterm="",
        n=int(__import__("os").environ.get("PARITY_DIFF_CONTEXT", "2")),
    )
    return "\n".join(list(lines)[2:DIFF_LINES])


@contextlib.asynccontextmanager
async def parity_stack(scenarios: ScenarioSet) -> AsyncIterator[ParityStack]:
    """Serve every case of ``scenarios`` for the module's tests."""
    async with ParityStack(scenarios) as stack:
        yield stack
