"""Finding the Flow a command serves or drives: ``MODULE:FLOW_FACTORY`` or a model name.

``MODULE:FLOW_FACTORY`` names a module to import and, in it, a callable that
takes no arguments and returns an `AgentSessionFlow` (an `AgentSessionFlow`
object itself is accepted too). When that does not resolve and the text is a
Pydantic AI model name such as ``openai:gpt-5.2``, a plain Pydantic AI agent on
that model is served instead, through the Pydantic AI adapter; the provider's
package and API key must be present.
"""

import importlib
from collections.abc import Callable
from typing import Any

import attrs

from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.launch.errors import CliError, UsageError

MODEL_FLOW_TYPE = "ChatAgent"
"""The Flow type of an agent built from a model name."""

EXAMPLE_TARGET = "dex_agents.cli.order_agent:build_order_flow"
"""A ``MODULE:FLOW_FACTORY`` that always resolves: the demo's order agent."""


@attrs.frozen(kw_only=True)
class LoadedFlow:
    """A Flow and where it came from."""

    flow: AgentSessionFlow
    """The Flow."""
    target: str
    """What the person wrote."""


def _import_attribute(module_name: str, attribute: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise CliError(f"unknown module {module_name!r}: no module of that name can be imported") from error
        raise CliError(f"importing module {module_name!r} failed: {error}") from error
    except Exception as error:
        raise CliError(f"importing module {module_name!r} failed: {type(error).__name__}: {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError as error:
        raise CliError(f"unknown flow factory {attribute!r}: module {module_name!r} has no such attribute") from error


def _call_factory(target: str, factory: Any) -> AgentSessionFlow:
    if isinstance(factory, AgentSessionFlow):
        return factory
    if not callable(factory):
        raise CliError(f"{target} is neither a flow factory (a callable) nor an AgentSessionFlow")
    try:
        flow = factory()
    except Exception as error:
        raise CliError(f"flow factory {target} failed: {type(error).__name__}: {error}") from error
    if not isinstance(flow, AgentSessionFlow):
        raise CliError(f"flow factory {target} returned {type(flow).__name__}, not an AgentSessionFlow")
    return flow


def load_flow(target: str) -> LoadedFlow:
    """Resolve ``MODULE:FLOW_FACTORY`` (or a Pydantic AI model name) to a Flow.

    Raises:
        UsageError: ``target`` has no ``:``.
        CliError: the module, the factory or the model cannot be used.
    """
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"expected MODULE:FLOW_FACTORY (for example {EXAMPLE_TARGET}), got {target!r}")
    try:
        factory = _import_attribute(module_name, attribute)
    except CliError as not_a_factory:
        model_flow = _model_flow_factory(target)
        if model_flow is None:
            raise not_a_factory from None
        return LoadedFlow(flow=model_flow(), target=target)
    return LoadedFlow(flow=_call_factory(target, factory), target=target)


def _model_flow_factory(target: str) -> Callable[[], AgentSessionFlow] | None:
    """Return a factory of a plain agent on model ``target``, or ``None`` if it is no model name.

    Raises:
        CliError: it is a model name but cannot be used here (package, key or adapter missing).
    """
    try:
        from pydantic_ai import Agent
        from pydantic_ai.exceptions import UserError as PydanticAIUserError
        from pydantic_ai.models import infer_model
    except ImportError:  # pragma: no cover - pydantic-ai-slim is a dependency
        return None
    try:
        model = infer_model(target)
    except PydanticAIUserError as error:
        if str(error).startswith("Unknown model"):
            return None
        raise CliError(f"model {target!r} cannot be used: {error}") from error
    except ImportError as error:
        raise CliError(f"model {target!r} needs its provider package: {error}") from error
    except Exception as error:
        raise CliError(f"model {target!r} cannot be used: {type(error).__name__}: {error}") from error
    from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow

    def factory() -> AgentSessionFlow:
        agent: Agent[None, str] = Agent(model, instructions="You are a helpful assistant.")
        return pydantic_ai_session_flow(agent, flow_type=MODEL_FLOW_TYPE)

    return factory
