"""What ``/quit`` says follows where the session lives: the in-process dev server or a server (± its Worker)."""

import pytest

from dex_agents.cli.chat import AfterQuit


@pytest.mark.parametrize(
    ("embedded", "serve_worker", "expected"),
    [
        (True, True, AfterQuit.ENDS_WITH_CHAT),
        (True, False, AfterQuit.ENDS_WITH_CHAT),
        (False, True, AfterQuit.WAITS_FOR_WORKER),
        (False, False, AfterQuit.KEEPS_RUNNING),
    ],
)
def test_the_session_ends_with_in_process_devserver_and_stays_on_a_server(
    embedded: bool, serve_worker: bool, expected: AfterQuit
) -> None:
    assert AfterQuit.of(embedded=embedded, serve_worker=serve_worker) is expected


def test_leaving_in_process_devserver_says_the_session_ends_and_never_that_it_keeps_running() -> None:
    farewell = AfterQuit.ENDS_WITH_CHAT.farewell("chat-1")
    assert farewell.startswith("left session chat-1; it ends with this chat")
    assert "keeps running" not in farewell


def test_leaving_the_only_worker_says_the_session_waits_for_another_worker() -> None:
    farewell = AfterQuit.WAITS_FOR_WORKER.farewell("chat-1")
    assert farewell.startswith("left session chat-1; it stays on the server and continues when a Worker serves")


def test_leaving_a_session_an_application_worker_serves_says_it_keeps_running() -> None:
    assert AfterQuit.KEEPS_RUNNING.farewell("chat-1") == "left session chat-1; it keeps running on the server"
