"""The dev server's pure rules outside condition matching: back-off, ID reuse, Worker targets, history pages."""

import asyncio

import grpc  # type: ignore[import-untyped]
import pytest
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import retry_delay
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._errors import ServiceError
from dex_agents.devserver._history import history_page, record
from dex_agents.devserver._state import Run, is_reuse_refused, worker_target
from dex_agents.devserver._store_journal import DROPPED_JOURNAL
from dex_agents.devserver._streams import Streams, message_charge
from dex_agents.devserver._workers import AttemptError

CONFIG = DevServerConfig()
FAILURE = AttemptError("boom", "it broke")


def _run(status: int = pb.FLOW_STATUS_RUNNING) -> Run:
    run = Run(
        flow_id="f",
        run_id="r",
        first_run_id="r",
        flow_type="T",
        request_id="q",
        started_at=0.0,
        worker_target="pull",
    )
    run.status = status
    return run


def test_the_back_off_doubles_from_one_second_by_default_up_to_a_hundred_times_it() -> None:
    delays = [retry_delay(pb.RetryPolicy(), attempt, FAILURE, CONFIG) for attempt in (1, 2, 3, 8, 20)]
    assert delays == [1.0, 2.0, 4.0, 100.0, 100.0]


def test_the_back_off_follows_the_retry_policy_when_it_sets_one() -> None:
    policy = pb.RetryPolicy(initial_interval_seconds=3, backoff_coefficient=3.0, maximum_interval_seconds=20)
    assert [retry_delay(policy, attempt, FAILURE, CONFIG) for attempt in (1, 2, 3)] == [3.0, 9.0, 20.0]


def test_a_worker_retry_after_wins_over_the_computed_back_off() -> None:
    failure = AttemptError("busy", "later", retry_after_seconds=7)
    assert retry_delay(pb.RetryPolicy(), 1, failure, CONFIG) == 7.0


@pytest.mark.parametrize(
    ("status", "policy", "refused"),
    [
        (pb.FLOW_STATUS_RUNNING, pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING, True),
        (pb.FLOW_STATUS_COMPLETED, pb.ID_REUSE_POLICY_UNSPECIFIED, True),
        (pb.FLOW_STATUS_COMPLETED, pb.ID_REUSE_POLICY_DISALLOW_REUSE, True),
        (pb.FLOW_STATUS_COMPLETED, pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY, True),
        (pb.FLOW_STATUS_FAILED, pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY, False),
        (pb.FLOW_STATUS_COMPLETED, pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING, False),
    ],
)
def test_a_new_start_of_a_flow_id_is_refused_as_its_reuse_policy_says(
    status: int, policy: int, *, refused: bool
) -> None:
    assert is_reuse_refused(_run(status), policy) is refused


def test_a_run_goes_to_pull_workers_to_an_advertised_address_or_to_the_default() -> None:
    assert worker_target(pb.FlowStartOptions(), "default") == "default"
    pull = pb.FlowStartOptions(flow_config_override=pb.FlowConfig(worker_target=pb.WorkerTarget(is_pull_mode=True)))
    assert worker_target(pull, "default") == "pull"
    listening = pb.FlowStartOptions(
        flow_config_override=pb.FlowConfig(worker_target=pb.WorkerTarget(address="127.0.0.1:9"))
    )
    assert worker_target(listening, "default") == "127.0.0.1:9"


def test_history_pages_continue_from_their_token_and_refuse_a_malformed_one() -> None:
    run = _run()
    for second in range(5):
        record(run, float(second), flow_closed=pb.FlowClosedHistoryEvent())
    first = history_page(run, pb.GetHistoryEventsRequest(flow_id="f"), 2)
    assert [e.event_id for e in first.events] == [1, 2]
    second = history_page(run, pb.GetHistoryEventsRequest(flow_id="f", next_page_token=first.next_page_token), 2)
    assert [e.event_id for e in second.events] == [3, 4]
    last = history_page(run, pb.GetHistoryEventsRequest(flow_id="f", next_page_token=second.next_page_token), 2)
    assert ([e.event_id for e in last.events], last.next_page_token) == ([5], b"")
    with pytest.raises(ServiceError):
        history_page(run, pb.GetHistoryEventsRequest(flow_id="f", next_page_token=b"x"), 2)


def test_the_defaults_are_the_real_servers_rules() -> None:
    assert CONFIG.default_maximum_attempts is None
    assert CONFIG.default_maximum_interval.total_seconds() == 100
    assert CONFIG.retry_delay_scale == 1.0
    assert CONFIG.dispatch_wait.total_seconds() == 10
    assert CONFIG.max_wait_seconds == 60
    assert CONFIG.grpc_max_message_bytes == 16 * 1024 * 1024
    assert CONFIG.stream_max_message_bytes == 100 * 1024
    assert (CONFIG.stream_trim_trigger, CONFIG.stream_trim_target) == (0.9, 0.8)
    assert CONFIG.keep_early_timer_skips is False


def test_the_back_off_maximum_is_a_hundred_seconds_whatever_the_initial_interval() -> None:
    policy = pb.RetryPolicy(initial_interval_seconds=30)
    assert [retry_delay(policy, attempt, FAILURE, CONFIG) for attempt in (1, 2, 3, 4)] == [30.0, 60.0, 100.0, 100.0]


def test_a_stream_message_is_charged_its_payload_flow_id_source_key_and_512_bytes() -> None:
    assert message_charge(100, "flow", "#Step-1", 512, "key") == 100 + 4 + 7 + 3 + 512


def test_a_stream_trims_from_ninety_to_eighty_percent_and_rejects_a_write_past_capacity() -> None:
    streams = Streams(CONFIG)
    value = pb.Value(string_value="x" * 77)  # 79 bytes on the wire: 600 charged with flow "f" and source "s0000000"
    capacity = 6000
    for index in range(9):
        streams.append("T", "s", capacity, "f", value, f"s{index:07d}", 0.0)
    assert len(streams.entries("T", "s", "f")) == 9  # 5400 bytes: at, not past, the trigger
    streams.append("T", "s", capacity, "f", value, "s0000009", 0.0)
    assert len(streams.entries("T", "s", "f")) == 8  # 6000 > 5400: trimmed to 4800
    with pytest.raises(ServiceError) as raised:
        streams.append("T", "s", capacity, "f", pb.Value(string_value="y" * 1200), "s0000010", 0.0)
    assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(ServiceError) as too_large:
        streams.append("T", "s", 0, "f", pb.Value(string_value="z" * 102_400), "s0000011", 0.0)
    assert too_large.value.code is grpc.StatusCode.INVALID_ARGUMENT


async def test_a_stream_shared_by_many_flows_reads_pages_and_trims_each_flow_in_its_own_order() -> None:
    streams = Streams(CONFIG)
    value = pb.Value(string_value="x" * 77)
    capacity = 60_000
    for index in range(120):
        streams.append("T", "s", capacity, f"f{index % 3}", value, f"s{index:07d}", 0.0)
    kept = {flow: streams.entries("T", "s", flow) for flow in ("f0", "f1", "f2")}
    assert sum(len(entries) for entries in kept.values()) < 120  # trimmed, oldest first across all flows
    for flow, entries in kept.items():
        sequences = [entry.sequence for entry in entries]
        assert sequences == sorted(sequences)
        assert all(entry.flow_id == flow for entry in entries)
        assert sequences[-1] >= 118  # the newest of each flow is kept
    f1 = kept["f1"]
    middle = f1[len(f1) // 2]
    found = await streams.read("T", "s", "f1", str(middle.sequence), 0)
    assert found == f1[len(f1) // 2 + 1]
    assert await streams.read("T", "s", "f1", str(f1[-1].sequence), 0) is None
    assert await streams.read("T", "s", "f1", "", 0) == f1[0]
    assert await streams.read("T", "s", "nobody", "", 0) is None
    page, token = streams.page("T", "s", "f1", 3, "")
    assert page == list(reversed(f1[-3:]))
    assert token == str(f1[-3].sequence)


async def test_a_stream_read_waits_for_its_own_flow_and_not_for_another() -> None:
    streams = Streams(CONFIG)
    value = pb.Value(string_value="v")
    reading = asyncio.create_task(streams.read("T", "s", "mine", "", 30))
    await asyncio.sleep(0)
    streams.append("T", "s", 0, "other", value, "#A-1", 0.0)
    await asyncio.sleep(0)
    assert not reading.done()
    entry = streams.append("T", "s", 0, "mine", value, "#A-2", 0.0)
    assert await asyncio.wait_for(reading, 5) == entry


async def test_a_waiting_stream_read_ends_with_nothing_when_the_server_drops_its_streams_to_reload() -> None:
    streams = Streams(CONFIG)
    reading = asyncio.create_task(streams.read("T", "s", "mine", "", 30))
    await asyncio.sleep(0)
    streams.drop(DROPPED_JOURNAL)
    assert await asyncio.wait_for(reading, 5) is None, "the reader polls again, on the Streams read back from disk"
    assert await streams.read("T", "s", "mine", "", 30) is None, "a dropped Streams never waits again"
