"""`dex-agents serve` sets uvicorn up as the web console does: no proxy headers, logs made visible."""

import logging
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette

from dex_agents.cli.serve import serve_uvicorn_config
from dex_agents.launch.output import VisibleLogFormatter

UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


@pytest.fixture(autouse=True)
def _uvicorn_loggers_restored() -> Iterator[None]:
    # uvicorn.Config applies its logging config to the process's loggers; put them back for the other tests.
    loggers = [logging.getLogger(name) for name in UVICORN_LOGGERS]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def test_serve_ignores_proxy_headers_so_no_client_header_can_name_another_address() -> None:
    config = serve_uvicorn_config(Starlette(), 0)
    assert config.proxy_headers is False


def test_serve_logs_uvicorn_through_the_visible_log_formatter() -> None:
    serve_uvicorn_config(Starlette(), 0)
    formatters = [handler.formatter for handler in logging.getLogger("uvicorn").handlers]
    assert formatters
    assert all(isinstance(formatter, VisibleLogFormatter) for formatter in formatters)
    record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "bad \x1b[2J request", None, None)
    assert "\x1b" not in formatters[0].format(record)  # type: ignore[union-attr]
