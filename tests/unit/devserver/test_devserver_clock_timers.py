"""`ServerClock.call_at`: callbacks due at a server-clock deadline, on the running loop (no task each)."""

import asyncio

from dex_agents.devserver._clock import ServerClock


async def test_a_clock_timer_fires_when_the_clock_is_advanced_past_its_deadline() -> None:
    clock = ServerClock(start=1000.0, frozen=True)
    fired: list[float] = []
    clock.call_at(1010.0, lambda: fired.append(clock.now()))
    clock.advance(5)
    assert fired == []
    clock.advance(5)
    assert fired == [1010.0]
    clock.advance(100)
    assert fired == [1010.0]  # once


async def test_a_cancelled_clock_timer_never_fires() -> None:
    clock = ServerClock(start=1000.0, frozen=True)
    fired: list[str] = []
    timer = clock.call_at(1001.0, lambda: fired.append("late"))
    timer.cancel()
    timer.cancel()
    clock.advance(10)
    assert fired == []


async def test_a_clock_timer_fires_by_itself_as_real_time_passes() -> None:
    clock = ServerClock()
    fired = asyncio.Event()
    clock.call_at(clock.now() + 0.01, fired.set)
    await asyncio.wait_for(fired.wait(), 5)


async def test_a_clock_timer_set_again_from_its_own_callback_waits_for_its_new_deadline() -> None:
    clock = ServerClock(start=1000.0, frozen=True)
    fired: list[float] = []

    def again() -> None:
        fired.append(clock.now())
        if len(fired) == 1:
            clock.call_at(1020.0, again)

    clock.call_at(1010.0, again)
    clock.advance(15)
    assert fired == [1015.0]
    clock.advance(5)
    assert fired == [1015.0, 1020.0]
