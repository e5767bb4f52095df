"""`DexDeliveryLedger` reads single-attempt starts back from the Stream pages a Client returns."""

from datetime import timedelta
from typing import Any, cast

import attrs
import pytest

from dex_agents.domain import events as ev
from dex_agents.domain.errors import DeliveryUnconfirmedError
from dex_agents.domain.events import AgentEvent, AgentEventBody
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.infrastructure.dex.deliveries import DexDeliveryLedger, UncheckedDeliveries
from dex_agents.infrastructure.dex.persistence import agent_events_stream

STREAM = agent_events_stream(1024 * 1024)


@attrs.frozen
class Message:
    value: AgentEvent


@attrs.frozen
class Page:
    messages: list[Message]
    next_page_token: str


@attrs.define
class PagedStream:
    """A Client stand-in serving a fixed Stream, newest first, ``size`` messages a page."""

    events: list[AgentEvent]
    size: int = 2
    pages_read: int = 0

    async def list_stream_messages(self, flow_id: str, stream: object, page_size: int, before: str = "") -> Page:
        self.pages_read += 1
        newest_first = self.events[::-1]
        start = int(before or 0)
        chunk = newest_first[start : start + self.size]
        more = start + self.size < len(newest_first)
        return Page([Message(e) for e in chunk], str(start + self.size) if more else "")


def event(body: AgentEventBody, execution: str = "CallSingleAttemptTool-3", attempt: int = 1) -> AgentEvent:
    return AgentEvent.enveloped(body, turn_id="turn-1", step_execution_id=execution, attempt=attempt)


def ledger(stream: PagedStream, timeout: timedelta = timedelta(seconds=30)) -> DexDeliveryLedger:
    built = DexDeliveryLedger(STREAM, confirm_timeout=timeout)
    built.bind(lambda: cast(Any, stream))
    return built


async def test_it_returns_this_attempts_markers_oldest_first_and_stops_at_the_calls_deferral() -> None:
    stream = PagedStream(
        [
            event(ev.tool_call_started("c1", "send", delivery="from-an-earlier-turn")),
            event(ev.tool_call_deferred("c1", "send", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE))),
            event(ev.text_delta("x")),
            event(ev.tool_call_started("c1", "send", delivery="first")),
            event(ev.tool_call_started("c1", "send", delivery="other-attempt"), attempt=2),
            event(ev.tool_call_started("c2", "send", delivery="other-call")),
            event(ev.tool_call_started("c1", "send", delivery="second")),
        ]
    )

    markers = await ledger(stream).started("s", "c1", step_execution_id="CallSingleAttemptTool-3", attempt=1)

    assert markers == ("first", "second")
    assert stream.pages_read == 3  # the fourth page, older than the deferral, is never read


async def test_confirm_returns_once_the_marker_is_stored() -> None:
    stream = PagedStream([event(ev.tool_call_started("c1", "send", delivery="mine"))])

    stored = await ledger(stream).confirm(
        "s", "c1", step_execution_id="CallSingleAttemptTool-3", attempt=1, delivery="mine"
    )

    assert stored == ("mine",)


async def test_confirm_fails_when_the_marker_never_shows() -> None:
    with pytest.raises(DeliveryUnconfirmedError, match="the tool did not run"):
        await ledger(PagedStream([]), timeout=timedelta(0)).confirm(
            "s", "c1", step_execution_id="CallSingleAttemptTool-3", attempt=1, delivery="mine"
        )


async def test_an_unbound_ledger_refuses_to_confirm_and_says_how_to_bind_a_client() -> None:
    unbound = DexDeliveryLedger(STREAM)

    with pytest.raises(DeliveryUnconfirmedError, match="bind_client"):
        await unbound.started("s", "c1", step_execution_id="CallSingleAttemptTool-3", attempt=1)


async def test_the_explicit_opt_out_reads_nothing_and_confirms_at_once() -> None:
    unchecked = UncheckedDeliveries()

    assert await unchecked.started("s", "c1", step_execution_id="x", attempt=1) == ()
    assert await unchecked.confirm("s", "c1", step_execution_id="x", attempt=1, delivery="d") == ("d",)
