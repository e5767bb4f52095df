"""The dev server on a data dir: what a stop (or a failed commit) leaves is what the next start goes on from.

In-process servers on a temporary data dir; the kill tests with a SIGKILLed server
child are in ``tests/integration/agent/test_engine_restarts.py``.
"""

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import dex
import pytest

from dex_agents.devserver import StoreError
from dex_agents.devserver._data_dir import DATABASE_FILE
from dex_agents.devserver._store import Row
from dex_agents.testing import wait_until as wait_until_async
from dex_agents.testing.devserver import (
    EXECUTE_COMPLETED_EVENT,
    TEST_RETRY_DELAY_SCALE,
    DevServer,
    DevServerConfig,
)
from tests.integration.devserver.flows import BASIC_EVENTS, STREAM_EVENTS, Flows, Seen, WaitOutcome, make_registry
from tests.integration.devserver.support import running_client, running_worker, wait_until

pytestmark = pytest.mark.integration


def config(start_time: float | None = None) -> DevServerConfig:
    return DevServerConfig(
        dispatch_wait=timedelta(seconds=5), retry_delay_scale=TEST_RETRY_DELAY_SCALE, start_time=start_time
    )


@contextlib.asynccontextmanager
async def serving(server: DevServer, tmp: Path, flows: Flows) -> AsyncIterator[dex.AsyncClient]:
    async with (
        running_worker(make_registry(flows), server.address, tmp / "worker"),
        running_client(make_registry(flows), server.address, tmp / "client") as client,
    ):
        yield client


async def test_a_server_started_again_on_its_data_dir_has_every_run_attribute_message_event_and_blob(
    tmp_path: Path, flows: Flows
) -> None:
    data = tmp_path / "data"
    async with DevServer(config(), data_dir=data) as server:
        async with serving(server, tmp_path, flows) as client:
            await client.start_flow(flows.basic, "b-1", "a")
            before = await client.wait_for_flow("b-1")
            await client.start_flow(flows.wait, "w-1", "for_n")
            await client.invoke_rpc(flows.wait.publish, "w-1", "x" * 5000)  # over the blob threshold
            await client.start_flow(flows.stream, "s-1", 3)
            await wait_until(lambda: server.active_executions("s-1") == {"Idle-1": "waiting"}, 10, "Idle to wait")
            first = await client.read_stream("s-1", STREAM_EVENTS)
            history = server.history("b-1")
            attempts = server.attempts()
        assert server.commit_stats().commits > 0
    async with DevServer(config(), data_dir=data) as server:
        assert server.restored_runs == 3
        assert server.history("b-1") == history
        assert server.attempts() == attempts
        assert server.active_executions("w-1") == {"Waiter-1": "waiting"}
        async with serving(server, tmp_path, flows) as client:
            after = await client.wait_for_flow("b-1")
            assert after.single_output(Seen) == before.single_output(Seen)
            events = await client.list_stream_messages("b-1", BASIC_EVENTS, 10)
            assert [m.value for m in events.messages] == ["begin:Begin-1"]
            second = await client.read_stream("s-1", STREAM_EVENTS, first.resume_token)
            assert second.value == "event-1", "a resume token taken before the restart reads on, no duplicate"
            await client.invoke_rpc(flows.wait.publish, "w-1", "y")
            outcome = (await client.wait_for_flow("w-1")).single_output(WaitOutcome)
            assert outcome.values == ["x" * 5000, "y"], "the queued message (a blob) was kept"
            await client.start_flow(flows.basic, "b-2", "a")  # new sessions start
            assert (await client.wait_for_flow("b-2")).single_output(Seen).step_execution_id == "Inspect-1"


async def test_a_timer_keeps_its_server_time_and_fires_at_once_when_it_fell_due_while_the_server_was_down(
    tmp_path: Path, flows: Flows
) -> None:
    data = tmp_path / "data"
    started = time.time()
    first = DevServer(config(start_time=started), data_dir=data)
    async with first as server, serving(server, tmp_path, flows) as client:
        await client.start_flow(flows.wait, "t-1", "timer")  # a 30 s Timer
        await server.wait_until_waiting("t-1", "Waiter-1")
        await client.start_flow(flows.wait, "t-2", "two_timers")  # 10 s and 100 s
        await server.wait_until_waiting("t-2", "Waiter-1")
    # The next start's clock is 40 s later: the server was "down" for 40 s.
    later = DevServer(config(start_time=started + 40), data_dir=data)
    async with later as server, serving(server, tmp_path, flows) as client:
        fired = (await client.wait_for_flow("t-1")).single_output(WaitOutcome)
        assert fired.timer_fired, "the 30 s Timer fell due while the server was down"
        early = (await client.wait_for_flow("t-2")).single_output(WaitOutcome)
        assert (early.timer_0, early.timer_1) == (False, True), "only the 10 s Timer fired"


async def test_a_second_server_on_a_data_dir_in_use_is_refused(tmp_path: Path) -> None:
    async with DevServer(config(), data_dir=tmp_path / "data"):
        with pytest.raises(StoreError, match="another dev server uses the data dir"):
            await DevServer(config(), data_dir=tmp_path / "data").start()


async def _altered_data_dir(tmp_path: Path, sql: str) -> Path:
    """A data dir a dev server wrote and left, then changed behind its back with ``sql``."""
    data = tmp_path / "data"
    async with DevServer(config(), data_dir=data):
        pass
    with sqlite3.connect(data / DATABASE_FILE) as connection:
        connection.execute(sql)
    return data


async def test_a_data_dir_of_another_schema_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    data = await _altered_data_dir(tmp_path, "PRAGMA user_version = 99")
    with pytest.raises(StoreError, match=r"schema version 99.*reads version 1.*delete") as refused:
        await DevServer(config(), data_dir=data).start()
    assert str(data) in str(refused.value)
    async with DevServer(config(), data_dir=tmp_path / "other"):  # the lock was released
        pass


async def test_a_corrupt_data_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / DATABASE_FILE).write_bytes(b"this is no SQLite file" * 100)
    with pytest.raises(StoreError, match=r"not a readable dev server database.*delete the data dir"):
        await DevServer(config(), data_dir=data).start()


def _ends_an_execution(rows: list[Row]) -> bool:
    """Whether a commit holds a Step's completion: its execution's row goes."""
    return any(table == "executions" and values is None for table, _, values in rows)


async def test_a_failed_commit_writes_nothing_and_the_step_runs_again_from_what_is_on_disk(
    tmp_path: Path, flows: Flows
) -> None:
    async with DevServer(config(), data_dir=tmp_path / "data") as server:
        store = server.store
        assert store is not None
        failed: list[int] = []

        def disk_full_once(rows: list[Row]) -> BaseException | None:
            if failed or not _ends_an_execution(rows):
                return None
            failed.append(len(rows))
            return sqlite3.OperationalError("database or disk is full")

        async with serving(server, tmp_path, flows) as client:
            await client.start_flow(flows.wait, "d-1", "for_one")
            await server.wait_until_waiting("d-1", "Waiter-1")
            store.fail_commit = disk_full_once
            await client.invoke_rpc(flows.wait.publish, "d-1", "m")
            outcome = (await client.wait_for_flow("d-1", timeout=timedelta(seconds=30))).single_output(WaitOutcome)
            assert failed, "the completion's commit failed once"
            assert outcome.values == ["m"]
            executes = [e for e in server.step_history("d-1") if e.event_type == EXECUTE_COMPLETED_EVENT]
            assert [e.step_execution_id for e in executes] == ["Waiter-1"], "one completion, nothing torn"
            # The failed commit held the first run's attempt record too: on disk, execute ran once, as attempt 1.
            assert [(a.method, a.attempt) for a in server.attempts("d-1")] == [("wait_for", 1), ("execute", 1)]


async def test_a_full_disk_fails_the_commit_and_the_server_goes_on_once_there_is_room(
    tmp_path: Path, flows: Flows
) -> None:
    async with DevServer(config(), data_dir=tmp_path / "data") as server:
        store = server.store
        assert store is not None
        async with serving(server, tmp_path, flows) as client:
            await client.start_flow(flows.wait, "f-1", "for_one")
            await server.wait_until_waiting("f-1", "Waiter-1")
            store.limit_size(0)  # SQLite's own SQLITE_FULL from here on
            with pytest.raises(dex.DexServiceError, match="database or disk is full"):
                await client.invoke_rpc(flows.wait.publish, "f-1", "x" * 200_000)
            store.limit_size(None)

            async def published() -> bool:  # refused until the server has read its data dir again
                try:
                    await client.invoke_rpc(flows.wait.publish, "f-1", "after")
                except dex.DexServiceError:
                    return False
                return True

            await wait_until_async("the server to take writes again", published, timeout=10)
            outcome = (await client.wait_for_flow("f-1", timeout=timedelta(seconds=30))).single_output(WaitOutcome)
            assert outcome.values == ["after"], "the refused write left nothing behind"


async def test_a_run_row_this_release_did_not_write_is_refused_with_what_to_do(tmp_path: Path) -> None:
    data = await _altered_data_dir(tmp_path, "INSERT INTO runs VALUES ('run-1', 'flow-1', 0, '{\"no_such_field\": 1}')")
    with pytest.raises(StoreError, match=r"runs table \(run-1\).*delete"):
        await DevServer(config(), data_dir=data).start()
