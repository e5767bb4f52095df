"""Kept tool return values are rebuilt into the tool's declared return type when JSON changed them."""

import datetime
from decimal import Decimal
from enum import Enum

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from dex_agents.adapters.pydantic_ai._return_types import ReturnTypes


class Size(Enum):
    SMALL = "small"


class Line(BaseModel):
    sku: str


def _agent() -> Agent[None, str]:
    agent = Agent(TestModel())

    @agent.tool_plain
    def when() -> datetime.datetime:
        return datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)

    @agent.tool_plain
    def size() -> Size:
        return Size.SMALL

    @agent.tool_plain
    def price() -> Decimal:
        return Decimal("1.10")

    @agent.tool_plain
    def lines() -> list[Line]:
        return [Line(sku="a")]

    @agent.tool_plain
    def count() -> int:
        return 1

    @agent.tool_plain
    def anything():  # type: ignore[no-untyped-def]  # a tool without a return annotation
        return "2026-12-02T00:00:00Z"

    return agent


def test_scalars_json_carries_as_strings_come_back_as_the_declared_type() -> None:
    types = ReturnTypes(_agent())
    assert types.restore("when", "2026-12-02T00:00:00Z") == datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)
    assert types.restore("size", "small") is Size.SMALL
    assert types.restore("price", "1.10") == Decimal("1.10")
    assert types.restore("lines", [{"sku": "a"}]) == [Line(sku="a")]


def test_a_value_that_does_not_round_trip_exactly_or_has_no_declared_type_stays_as_stored() -> None:
    types = ReturnTypes(_agent())
    assert types.restore("count", "1") == "1", "coerced: the tool returned a string after all"
    assert types.restore("when", "not a date") == "not a date"
    assert types.restore("anything", "2026-12-02T00:00:00Z") == "2026-12-02T00:00:00Z"
    assert types.restore("unknown", "small") == "small"
    assert types.restore("count", True) is True
    assert types.restore("count", None) is None
