"""A model Step on a model that cannot stream: one non-streamed request, replayed as a stream.

The model Step listens to the run's events (live ``text_delta`` and
``reasoning_delta``), which makes Pydantic AI stream every model request. A
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

from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestContext,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext


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

    A ``WrapperModel`` (``InstrumentedModel``...) streams when the model it wraps does.
    """
    while isinstance(model, WrapperModel):
        if isinstance(model, CompletedStreamModel):
            return True
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    return type(model).request_stream is not Model.request_stream


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
