"""JSON values as plain Python types, for event payloads."""

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
"""A JSON scalar."""

JsonValue: TypeAlias = JsonScalar | Sequence["JsonValue"] | Mapping[str, "JsonValue"]
"""Any JSON value; arrays and objects are read-only views."""

JsonObject: TypeAlias = Mapping[str, JsonValue]
"""A JSON object."""
