"""The fake clock: real time plus advances, or frozen."""

import asyncio

import pytest

from dex_agents.testing.devserver import ServerClock

pytestmark = pytest.mark.integration


async def test_frozen_clock_moves_only_on_advance() -> None:
    clock = ServerClock(start=1000.0, frozen=True)
    assert clock.now() == 1000.0
    sleeper = asyncio.ensure_future(clock.sleep_until(1010.0))
    await asyncio.sleep(0)
    clock.advance(9)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(1)
    assert await asyncio.wait_for(sleeper, 5) is True
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


async def test_sleep_ends_early_on_wake() -> None:
    clock = ServerClock(start=0.0, frozen=True)
    wake = asyncio.Event()
    sleeper = asyncio.ensure_future(clock.sleep_until(100.0, wake=wake))
    await asyncio.sleep(0)
    wake.set()
    assert await asyncio.wait_for(sleeper, 5) is False


async def test_running_clock_follows_real_time_plus_advances() -> None:
    clock = ServerClock(start=0.0)
    before = clock.now()
    clock.advance(60)
    assert clock.now() >= before + 60
    assert await asyncio.wait_for(clock.sleep_until(clock.now() + 0.01), 5) is True
