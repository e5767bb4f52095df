"""How a model Step's text and reasoning reach the live events while the model streams.

**Usually** (`DeltaForwardingCapability`): the run does not stream. Listening to
a run's events makes Pydantic AI stream the whole run through every
capability's event-stream wrappers, which doubled the Worker CPU of a
``RunModel``. Instead, the capability (innermost, like the fallback
below) wraps the model serving each request (``get_wrapper_model``, after
every ``prepare_model_request`` picked it) in
`DeltaForwardingModel`: its ``request`` makes the wrapped model's streamed
request, writes every text and reasoning delta as it arrives, and returns the
complete response, so the run, its hooks and the response are those of a
non-streamed request. A model that cannot stream serves one ``request``,
replayed as one delta per part. So does a ``TestModel``
(`asks_as_a_plain_run`): its stream is simulated from the response its
``request`` gives, with usage estimated otherwise, and ``agent.run`` calls
``request``; so the response and usage are the plain run's. A live run's
model Step capability wraps the model itself
(`dex_agents.adapters.pydantic_ai._live_runs.LiveModelStepCapability`).

**When the agent streams its runs anyway** (an ``event_stream_handler`` or a
capability or hook that listens to events: `run_streams`), the model Step
listens to the run's events instead
(`dex_agents.adapters.pydantic_ai._capabilities.StreamingModelStepCapability`),
and `NonStreamingFallbackCapability` serves a model that cannot stream. A
model that cannot stream, such as a ``FunctionModel`` without
``stream_function`` (the usual way to test an agent) or a custom ``Model``
without ``request_stream``, would fail every ``RunModel``.
`NonStreamingFallbackCapability` (innermost, so it sees the model that will
serve the request after every other capability's ``prepare_model_request``)
swaps such a model for `CompletedStreamModel`: it makes one non-streamed
``request`` and replays the complete response as stream events, so the run,
its hooks and the session's events stay the same, the text arriving in one
delta per part.
"""

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.messages import ModelMessage, ModelResponse, PartStartEvent, TextPart, ThinkingPart
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestContext,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from dex_agents.adapters.pydantic_ai._capabilities import DeltaSink, forward_delta
from dex_agents.domain.errors import RunnerContractError


class CompletedStreamModel(WrapperModel):
    """Serves a streamed request with one non-streamed request, replayed as stream events."""

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """Make the wrapped model's ``request`` and yield its response as a completed stream."""
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters, replay_events=True)


def can_stream(model: Model) -> bool:
    """Whether ``model`` serves streamed requests.

    A ``WrapperModel`` (``InstrumentedModel``...) streams when the model it wraps does, a
    ``FallbackModel`` when each of its models does.
    """
    while isinstance(model, WrapperModel):
        if isinstance(model, CompletedStreamModel):
            return True
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    if isinstance(model, FallbackModel):
        # It streams with whichever model answers: each must be able to.
        return all(can_stream(member) for member in model.models)
    return type(model).request_stream is not Model.request_stream


def asks_as_a_plain_run(model: Model) -> bool:
    """Whether a non-streamed request goes to ``model``'s ``request`` although it can stream.

    True for Pydantic AI's ``TestModel``: its stream replays its ``request``'s response word by
    word but estimates usage per chunk (a tool-call response streams 0 output tokens), so
    streaming it would change the usage a plain run reports. A ``FunctionModel`` streams
    when it has a ``stream_function``: that is the user's own script of a stream.
    """
    while isinstance(model, WrapperModel):
        model = model.wrapped
    if isinstance(model, FallbackModel):
        return any(asks_as_a_plain_run(member) for member in model.models)
    return isinstance(model, TestModel)


@dataclass
class NonStreamingFallbackCapability(AbstractCapability[Any]):
    """Swaps a model that cannot stream for `CompletedStreamModel` in a streamed request."""

    def get_ordering(self) -> CapabilityOrdering | None:
        """Return the innermost position: its ``prepare_model_request`` runs last."""
        return CapabilityOrdering(position="innermost")

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Replace the serving model when the request streams and the model cannot."""
        if not request_context.streaming or can_stream(request_context.model):
            return request_context
        return replace(request_context, model=CompletedStreamModel(request_context.model))

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None


def run_streams(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the agent's runs stream whatever the model Step adds (an event handler or event listener).

    Asked before every model Step, so an ``agent.override(root_capability=...)`` counts. Anything but a
    plain ``Agent`` counts as streaming: its runs may add handlers this check cannot see.
    """
    if type(agent) is not Agent or agent.event_stream_handler is not None:
        return True
    try:
        base, _ = agent._base_run_capability()  # noqa: SLF001 - the capability layer the run itself uses
    except AttributeError:
        return True
    return base.has_on_event or base.has_wrap_run_event_stream


class DeltaForwardingModel(WrapperModel):
    """Serves a non-streamed request with a streamed one, writing text and reasoning deltas as they arrive."""

    def __init__(self, wrapped: Model, events: DeltaSink) -> None:
        """Wrap the model that serves the request; ``events`` gets the deltas."""
        super().__init__(wrapped)
        self.events = events
        # Decided once per request (a model is wrapped for each): a request, or a stream whose deltas are forwarded.
        self._asks = not can_stream(wrapped) or asks_as_a_plain_run(wrapped)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """Refuse: the run streams after all (`run_streams` missed a listener), which would lose the live text.

        Raises:
            RunnerContractError: always; never expected.
        """
        raise RunnerContractError(
            "the model Step's run streams although no event listener was found; its live text would be lost"
        )
        yield  # type: ignore[unreachable]  # pragma: no cover - makes this an async generator

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Stream the wrapped model's response, forwarding deltas; return the whole response."""
        if self._asks:
            response = await self.wrapped.request(messages, model_settings, model_request_parameters)
            for index, part in enumerate(response.parts):
                if isinstance(part, TextPart | ThinkingPart):
                    forward_delta(self.events, PartStartEvent(index=index, part=part))
            return response
        async with self.wrapped.request_stream(messages, model_settings, model_request_parameters) as stream:
            async for event in stream:
                forward_delta(self.events, event)
            return stream.get()


@dataclass
class DeltaForwardingCapability(AbstractCapability[Any]):
    """Serves every non-streamed model request of the run with `DeltaForwardingModel`."""

    events: DeltaSink | None = None
    """Where the deltas go; ``None``: nowhere, the request is left alone."""

    def get_ordering(self) -> CapabilityOrdering | None:
        """Return the innermost position: it wraps the model every other capability picked."""
        return CapabilityOrdering(position="innermost")

    def get_wrapper_model(self, model: Model) -> Model | None:
        """Serve each request with `DeltaForwardingModel` (the model other capabilities picked, wrapped first).

        A wrapper rather than a ``prepare_model_request`` hook: a run with such a hook copies every
        tool definition for each model request.
        """
        if self.events is None:
            return None
        return DeltaForwardingModel(model, self.events)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None
