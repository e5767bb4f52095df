"""`PayloadView`: an event payload read as the spec's JSON object, beside its typed fields.

The spec gives each event's payload as a JSON object (``tool_call_finished``
``{"tool_call_id", "tool_name", "status"}``); the payload classes keep typed
fields (``payload.status`` is a `ToolCallStatus`) and, through this base, also
read as a read-only mapping of the same object: ``payload["status"]``,
``payload.get("status")``, ``keys``, ``values``, ``items``, iteration, ``len``
and ``in``. The mapping holds the wire values: enum members as their text,
datetimes as ISO 8601 text, nested values (usage) as JSON objects. It is not
registered as a `collections.abc.Mapping` (the codec reads payloads as attrs
classes) and does not compare equal to a dict.
"""

from collections.abc import Iterator, Mapping
from datetime import datetime
from enum import Enum

from dex_agents.domain.json_values import JsonValue


def _wire(value: object) -> JsonValue:
    if isinstance(value, Enum):
        return _wire(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    fields = getattr(type(value), "__attrs_attrs__", None)
    if fields is not None:
        return {field.name: _wire(getattr(value, field.name)) for field in fields}
    if isinstance(value, Mapping):
        return {str(key): _wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class PayloadView:
    """Read-only mapping access to an attrs payload's fields, as JSON values (the base of every payload class)."""

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        return tuple(field.name for field in getattr(type(self), "__attrs_attrs__", ()))

    def __getitem__(self, key: str) -> JsonValue:
        if key not in self._names():
            raise KeyError(key)
        return _wire(getattr(self, key))

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        """The value of ``key``, or ``default`` when the payload has no such key."""
        return self[key] if key in self._names() else default

    def keys(self) -> tuple[str, ...]:
        """The payload's keys, in field order."""
        return self._names()

    def values(self) -> tuple[JsonValue, ...]:
        """The payload's values as JSON, in field order."""
        return tuple(self[name] for name in self._names())

    def items(self) -> tuple[tuple[str, JsonValue], ...]:
        """``(key, value)`` pairs, in field order."""
        return tuple((name, self[name]) for name in self._names())

    def to_dict(self) -> dict[str, JsonValue]:
        """The payload as the JSON object the spec shows (a new dict)."""
        return dict(self.items())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, key: object) -> bool:
        return key in self._names()
