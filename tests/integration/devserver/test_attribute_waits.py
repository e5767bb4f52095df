"""``WaitForAttribute``: a Client waits for a scalar Attribute of a Flow's current run to match."""

import asyncio
from datetime import timedelta

import dex
import pytest
from dex import AttributeMatch

from tests.integration.devserver.flows import STATE, Flows, gate, reached
from tests.integration.devserver.support import Stack, wait_until

pytestmark = pytest.mark.integration

SOON = dex.WaitForAttributeOptions(request_timeout=timedelta(seconds=1))
LONG = dex.WaitForAttributeOptions(request_timeout=timedelta(seconds=30))


async def test_a_wait_returns_the_value_a_step_commits_and_not_before(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.lock, "attr-1", "")
    await wait_until(reached("holder").is_set, what="Holder to start")
    waiting = asyncio.ensure_future(
        stack.client.wait_for_attribute_match("attr-1", STATE, AttributeMatch.equal_to("held"), LONG)
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    gate("holder").set()
    assert await waiting == "held"


async def test_a_value_that_matches_already_is_returned_at_once_and_an_rpc_write_wakes_a_wait(
    stack: Stack, flows: Flows
) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "attr-2", "")
    await stack.devserver.wait_until_waiting("attr-2", "Listener-1")
    assert await stack.client.wait_for_attribute_match("attr-2", STATE, AttributeMatch.not_equal_to("x"), SOON) == (
        "held"
    )
    waiting = asyncio.ensure_future(
        stack.client.wait_for_attribute_match("attr-2", STATE, AttributeMatch.equal_to("late"), LONG)
    )
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await stack.client.invoke_rpc(flows.lock.locked_write, "attr-2", "late")
    assert await waiting == "late"


async def test_a_wait_that_never_matches_ends_with_the_request_timeout(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "attr-3", "")
    await stack.devserver.wait_until_waiting("attr-3", "Listener-1")
    with pytest.raises(dex.RequestTimeoutError):
        await stack.client.wait_for_attribute_match("attr-3", STATE, AttributeMatch.equal_to("never"), SOON)


async def test_a_wait_on_a_closed_or_unknown_flow_is_refused(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "attr-4", "")
    await stack.devserver.wait_until_waiting("attr-4", "Listener-1")
    waiting = asyncio.ensure_future(
        stack.client.wait_for_attribute_match("attr-4", STATE, AttributeMatch.equal_to("never"), LONG)
    )
    await asyncio.sleep(0.1)
    await stack.client.invoke_rpc(flows.lock.locked_write, "attr-4", "bye")  # the Listener completes the Flow
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await waiting
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await stack.client.wait_for_attribute_match("attr-4", STATE, AttributeMatch.equal_to("bye"), SOON)
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await stack.client.wait_for_attribute_match("attr-none", STATE, AttributeMatch.equal_to("x"), SOON)
