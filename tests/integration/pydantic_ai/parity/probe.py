"""What a parity scenario's agent did, recorded the same way in a plain run and in a session.

A `Probe` is handed to each scenario. Its `Probe.model` wraps the scenario's
scripted responses in a ``FunctionModel`` that records what every model request
saw (the messages the model was given, the function and output tools offered,
the instructions, the settings, whether text output was allowed). Tools call
`Probe.invoked` to record what they ran with. When the scenario's variant
watches events, `Probe.capabilities` holds a ``ProcessEventStream`` recording
every event (with the ``run_step`` of the context that saw it).

Everything is normalized to plain JSON data first (`normalize`): timestamps,
run and conversation IDs and provider response IDs are dropped, so two runs
compare equal when they did the same thing.
"""

import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai._instrumentation import get_instructions
from pydantic_ai.capabilities import AbstractCapability, ProcessEventStream
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_core import to_jsonable_python

VOLATILE_KEYS = frozenset({"timestamp", "run_id", "conversation_id", "provider_response_id", "duration"})
"""Keys that differ between any two runs, whatever they did (``duration``: of a failed attempt)."""

Respond = Callable[[list[ModelMessage], AgentInfo], ModelResponse]
"""A scenario's scripted model: the response to the messages it was sent."""


def normalize(value: object) -> Any:
    """Return ``value`` as plain JSON data without `VOLATILE_KEYS`."""
    return _strip(to_jsonable_python(value, fallback=repr))


def _strip(data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _strip(item) for key, item in data.items() if key not in VOLATILE_KEYS}
    if isinstance(data, list):
        return [_strip(item) for item in data]
    return data


def normalize_messages(messages: Sequence[ModelMessage]) -> list[Any]:
    """Return messages as Pydantic AI serializes them, without `VOLATILE_KEYS`."""
    stripped: list[Any] = _strip(json.loads(ModelMessagesTypeAdapter.dump_json(list(messages))))
    return stripped


def turn_step(messages: Sequence[ModelMessage]) -> int:
    """How many model responses the messages hold since the last user prompt (0: the turn's first call)."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            count += 1
        elif any(isinstance(part, UserPromptPart) for part in message.parts) and not _only_tool_content(message):
            return count
    return count


def _only_tool_content(message: ModelRequest) -> bool:
    """Whether a request's user prompts came from tools (``ToolReturn.content``), not from the user."""
    from pydantic_ai.messages import ToolReturnPart

    return any(isinstance(part, ToolReturnPart) for part in message.parts)


def last_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the last user prompt the model was sent."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and not _only_tool_content(message):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def text(content: str) -> ModelResponse:
    """A response holding only text."""
    return ModelResponse(parts=[TextPart(content)])


def calls(*items: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    """A response holding tool calls ``(tool_call_id, tool_name, args)``, in that order."""
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id) for call_id, name, args in items])


class Probe:
    """Records model requests, tool invocations and (when ``watch_events``) events of one scenario variant."""

    def __init__(self, *, watch_events: bool) -> None:
        """Record events only when ``watch_events`` (the agent then streams its runs, as a handler makes it)."""
        self.watch_events = watch_events
        self.requests: list[Any] = []
        self.invocations: list[Any] = []
        self.events: list[Any] = []

    def reset(self) -> None:
        """Forget everything recorded (between the plain run and the session)."""
        self.requests.clear()
        self.invocations.clear()
        self.events.clear()

    @property
    def capabilities(self) -> list[AbstractCapability[Any]]:
        """What the scenario's agent must list among its capabilities (the event recorder, when watching)."""
        if not self.watch_events:
            return []
        return [ProcessEventStream(self._record_events)]

    def invoked(self, tool_name: str, **details: object) -> None:
        """Record that a tool ran, with what it saw."""
        self.invocations.append(normalize({"tool": tool_name, **details}))

    def model(
        self, respond: Respond, *, name: str = "scripted", settings: ModelSettings | None = None
    ) -> FunctionModel:
        """A ``FunctionModel`` answering with ``respond`` and recording what each request saw.

        It streams only for a variant that watches events (the plain run then streams too): a
        ``FunctionModel`` estimates the usage of a streamed response differently.
        """

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.requests.append(_request_seen(messages, info))
            return respond(messages, info)

        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            response = answer(messages, info)
            for index, part in enumerate(response.parts):
                match part:
                    case TextPart(content=content):
                        yield content
                    case ThinkingPart(content=content):
                        yield {index: DeltaThinkingPart(content=content)}
                    case ToolCallPart():
                        yield {
                            index: DeltaToolCall(
                                part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                            )
                        }
                    case _:
                        raise AssertionError(f"the scripted stream cannot send {part!r}")

        if self.watch_events:
            return FunctionModel(answer, stream_function=stream, model_name=name, settings=settings)
        return FunctionModel(answer, model_name=name, settings=settings)

    def test_model(self, **options: Any) -> TestModel:
        """A ``TestModel`` (built with ``options``) recording what each request saw, as `model` does."""
        return _RecordingTestModel(self.requests, **options)

    async def _record_events(self, ctx: RunContext[Any], stream: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in stream:
            self.events.append({"run_step": ctx.run_step, "event": type(event).__name__, **normalize(event)})


class _RecordingTestModel(TestModel):
    """A ``TestModel`` appending what each request saw to ``requests`` (streamed or not)."""

    def __init__(self, requests: list[Any], **options: Any) -> None:
        super().__init__(**options)
        self._requests = requests

    def _request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        info = AgentInfo(
            function_tools=model_request_parameters.declared_function_tools,
            allow_text_output=model_request_parameters.allow_text_output,
            output_tools=model_request_parameters.output_tools,
            model_settings=model_settings,
            model_request_parameters=model_request_parameters,
            instructions=get_instructions(messages, model_request_parameters),
        )
        self._requests.append(_request_seen(messages, info))
        return super()._request(messages, model_settings, model_request_parameters)


def _request_seen(messages: list[ModelMessage], info: AgentInfo) -> Any:
    parameters = info.model_request_parameters
    return {
        "messages": normalize_messages(messages),
        "function_tools": normalize(info.function_tools),
        "output_tools": normalize(info.output_tools),
        "allow_text_output": info.allow_text_output,
        "output_mode": parameters.output_mode,
        "instructions": info.instructions,
        "model_settings": normalize(info.model_settings),
    }


def sorted_result_events(events: Iterable[Any]) -> list[Any]:
    """The events, each run of consecutive tool-result events sorted by call ID (parallel calls finish in any order)."""
    ordered: list[Any] = []
    block: list[Any] = []
    for event in events:
        if event["event"] == "FunctionToolResultEvent":
            block.append(event)
            continue
        ordered.extend(sorted(block, key=_call_id))
        block = []
        ordered.append(event)
    ordered.extend(sorted(block, key=_call_id))
    return ordered


def _call_id(event: Any) -> str:
    return str(event.get("part", {}).get("tool_call_id", ""))
