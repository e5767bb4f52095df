"""Bad input and unreachable servers: one clear line on standard error and a non-zero exit, no traceback."""

import socket
from collections.abc import Iterator

import grpc  # type: ignore[import-untyped]
import pytest
from dex import DexServiceError, ErrorSubStatus, FlowNotActiveOrNotFoundError

from dex_agents.cli import main
from dex_agents.cli.errors import EXIT_FAILURE, EXIT_USAGE, CliError, explain

ORDER_FLOW = "dex_agents.cli.order_agent:build_order_flow"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_no_command_prints_the_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == EXIT_USAGE
    assert "demo" in out + err
    assert "dev-server" in out + err


def test_yes_and_no_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--yes", "--no")
    assert code == EXIT_USAGE
    assert "--yes and --no exclude each other" in err


def test_an_unknown_module_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "chat", "no_such_module_xyz:build")
    assert code == EXIT_FAILURE
    assert err.splitlines() == ["error: unknown module 'no_such_module_xyz': no module of that name can be imported"]
    assert out == ""


def test_debug_adds_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "chat", "no_such_module_xyz:build", "--debug")
    assert code == EXIT_FAILURE
    assert "Traceback" in err
    assert err.strip().splitlines()[-1] == (
        "error: unknown module 'no_such_module_xyz': no module of that name can be imported"
    )


def test_an_unknown_factory_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "chat", "dex_agents.cli.order_agent:nope")
    assert code == EXIT_FAILURE
    assert err.splitlines() == [
        "error: unknown flow factory 'nope': module 'dex_agents.cli.order_agent' has no such attribute"
    ]


def test_a_target_without_a_colon_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "chat", "orders")
    assert code == EXIT_USAGE
    assert "expected MODULE:FLOW_FACTORY" in err


def test_a_malformed_server_address_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "chat", ORDER_FLOW, "--server", "localhost")
    assert code == EXIT_USAGE
    assert err.splitlines() == ["error: expected the server as HOST:PORT (for example 127.0.0.1:8801), got 'localhost'"]


@pytest.mark.parametrize(
    "command",
    [
        ["chat", ORDER_FLOW],
        ["watch", "order-session-7", "--flow", ORDER_FLOW],
        ["approve", "order-session-7", "turn-1.call-2", "--flow", ORDER_FLOW],
        ["reject", "order-session-7", "turn-1.call-2", "no", "--flow", ORDER_FLOW],
    ],
)
def test_a_server_that_is_not_reachable_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], closed_port: int, command: list[str]
) -> None:
    code, _, err = run(capsys, *command, "--server", f"127.0.0.1:{closed_port}")
    assert code == EXIT_FAILURE
    assert err.splitlines() == [f"error: cannot reach Dex at 127.0.0.1:{closed_port} (connection refused)"]


def test_dev_server_on_a_taken_port_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str], taken_port: int) -> None:
    code, _, err = run(capsys, "dev-server", "--port", str(taken_port))
    assert code == EXIT_FAILURE
    assert err.splitlines() == [f"error: port {taken_port} on 127.0.0.1 is already in use (pick another with --port)"]


def test_unexpected_errors_become_one_line_that_names_their_type() -> None:
    assert explain(RuntimeError("boom\n  at line 3")).message == "RuntimeError: boom at line 3"
    assert explain(KeyError()).message == "KeyError"
    problem = CliError("already clear", exit_code=3)
    assert explain(problem) is problem


def test_dex_errors_become_one_line_that_names_the_operation_or_session() -> None:
    missing = FlowNotActiveOrNotFoundError(
        grpc.StatusCode.NOT_FOUND, ErrorSubStatus.FLOW_NOT_EXISTS, "flow s not found", "invoke_rpc", "s"
    )
    assert explain(missing).message == "unknown session 's': flow s not found"
    failed = DexServiceError(grpc.StatusCode.INTERNAL, ErrorSubStatus.UNCATEGORIZED, "it broke", "read_stream", None)
    assert explain(failed).message == "Dex read_stream failed: it broke"
