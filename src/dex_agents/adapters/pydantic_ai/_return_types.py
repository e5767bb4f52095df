"""Tool return values JSON cannot carry, rebuilt from the tool's return annotation.

A kept tool result (`dex_agents.adapters.pydantic_ai._tool_state`) is JSON, as
Pydantic AI serializes it: a return of a Pydantic model or a dataclass comes
back as a ``dict``, a ``datetime``, ``date``, ``Enum``, ``UUID`` or ``Decimal``
as a string or number. A model reads the same JSON either way, but Python code
that sees the return part (a ``FunctionModel``, a history processor, a hook)
would see another type than in a plain run. So a resumed run gets the value
validated into the tool's declared return type (``ToolReturn[X]`` → ``X``)
when all of these hold, and the stored value otherwise:

- the tool is a function tool of one of the agent's toolsets (found by name,
  without prefixes), with a return annotation other than ``Any``/``object``;
- the value is a JSON container or scalar (not ``None`` or a ``bool``, which
  JSON keeps as they were);
- validation succeeds and the rebuilt value serializes back to exactly the
  stored JSON (nothing coerced).
"""

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter
from pydantic_ai import ToolReturn
from pydantic_ai.tools import Tool

_NO_TYPE = object()


def _tool_function(agent: object, tool_name: str) -> Callable[..., Any] | None:
    found: list[Callable[..., Any]] = []

    def visit(toolset: object) -> None:
        tools = getattr(toolset, "tools", None)
        if isinstance(tools, Mapping):
            tool = tools.get(tool_name)
            if isinstance(tool, Tool):
                found.append(tool.function)

    for toolset in getattr(agent, "toolsets", ()):
        apply = getattr(toolset, "apply", None)
        if callable(apply):
            apply(visit)
    return found[0] if found else None


def _return_annotation(function: Callable[..., Any]) -> object:
    annotation: object = inspect.signature(function).return_annotation
    if isinstance(annotation, str):
        annotation = get_type_hints(function).get("return", _NO_TYPE)
    if annotation is inspect.Signature.empty or annotation in (Any, object, None):
        return _NO_TYPE
    if get_origin(annotation) is ToolReturn or annotation is ToolReturn:
        args = get_args(annotation)
        return args[0] if args and args[0] not in (Any, object) else _NO_TYPE
    return annotation


class ReturnTypes:
    """Rebuilds kept return values of one agent's tools (see the module docstring); adapters are cached by tool."""

    def __init__(self, agent: object) -> None:
        """Look tools up in ``agent``'s toolsets."""
        self._agent = agent
        self._adapters: dict[str, TypeAdapter[Any] | None] = {}

    def _adapter(self, tool_name: str) -> TypeAdapter[Any] | None:
        if tool_name not in self._adapters:
            adapter: TypeAdapter[Any] | None = None
            try:
                function = _tool_function(self._agent, tool_name)
                annotation = _NO_TYPE if function is None else _return_annotation(function)
                if annotation is not _NO_TYPE:
                    adapter = TypeAdapter(cast(Any, annotation))
            except Exception:  # noqa: BLE001 - an annotation Pydantic cannot handle: keep the stored value
                adapter = None
            self._adapters[tool_name] = adapter
        return self._adapters[tool_name]

    def restore(self, tool_name: str, value: object) -> object:
        """Return ``value`` as the tool's declared return type, or unchanged."""
        if not isinstance(value, dict | list | str | int | float) or isinstance(value, bool):
            return value
        adapter = self._adapter(tool_name)
        if adapter is None:
            return value
        try:
            restored = adapter.validate_python(value)
            if adapter.dump_python(restored, mode="json") != value:
                return value
        except Exception:  # noqa: BLE001 - not the declared type after all: keep the stored value
            return value
        return restored
