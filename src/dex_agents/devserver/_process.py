"""Run the dev server as a child process (``DevServerProcess``) and pass its config as JSON."""

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from datetime import timedelta
from types import TracebackType
from typing import Any

import grpc  # type: ignore[import-untyped]

from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._service import CONTROL_SERVICE


def config_to_json(config: DevServerConfig) -> str:
    """Encode a config for ``--config-json`` (durations as seconds)."""
    values: dict[str, Any] = {}
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        values[item.name] = value.total_seconds() if isinstance(value, timedelta) else value
    return json.dumps(values, sort_keys=True)


def config_from_json(text: str) -> DevServerConfig:
    """Decode ``--config-json``: a JSON object of ``DevServerConfig`` fields.

    Raises:
        ValueError: On an unknown field or a value of the wrong kind.
    """
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("--config-json must be a JSON object")
    defaults = DevServerConfig()
    values: dict[str, Any] = {}
    known = {item.name for item in dataclasses.fields(DevServerConfig)}
    for name, value in raw.items():
        if name not in known:
            raise ValueError(f"unknown DevServerConfig field {name!r}")
        default = getattr(defaults, name)
        values[name] = timedelta(seconds=value) if isinstance(default, timedelta) else value
    return DevServerConfig(**values)


class DevServerProcess:
    """The dev server in a child process (``python -m dex_agents.devserver``).

    ``async with DevServerProcess() as dex:`` starts it, reads the address it printed and
    stops it with SIGTERM (then SIGKILL) on exit.
    """

    def __init__(
        self,
        config: DevServerConfig | None = None,
        *,
        port: int = 0,
        python: str = sys.executable,
        startup_timeout: float = 30.0,
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Describe the child process; ``start`` launches it.

        Args:
            config: Server rules passed as ``--config-json``.
            port: Port to bind; 0 picks a free one (a restart binds the port the first start got).
            python: The interpreter to run.
            startup_timeout: Real seconds to wait for the address line.
            data_dir: Where the child keeps its data (``--data``); ``None`` keeps it in memory.
        """
        self.config = config or DevServerConfig()
        self.data_dir = None if data_dir is None else os.fspath(data_dir)
        self._port = port
        self._python = python
        self._startup_timeout = startup_timeout
        self._process: asyncio.subprocess.Process | None = None
        self._address = ""

    @property
    def address(self) -> str:
        """The ``127.0.0.1:<port>`` address the child bound.

        Raises:
            RuntimeError: If the child is not running.
        """
        if not self._address:
            raise RuntimeError("the dev server process is not started")
        return self._address

    @property
    def pid(self) -> int:
        """The child's process ID."""
        if self._process is None:
            raise RuntimeError("the dev server process is not started")
        return self._process.pid

    async def start(self) -> None:
        """Launch the child and wait for the address it prints.

        Raises:
            RuntimeError: If the child exits or prints nothing in time.
        """
        data = [] if self.data_dir is None else ["--data", self.data_dir]
        process = await asyncio.create_subprocess_exec(
            self._python,
            "-m",
            "dex_agents.devserver",
            "--port",
            str(self._port),
            "--config-json",
            config_to_json(self.config),
            *data,
            stdout=asyncio.subprocess.PIPE,
        )
        self._process = process
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), self._startup_timeout)
        except TimeoutError:
            await self.stop()
            raise RuntimeError("the dev server did not print its address in time") from None
        address = line.decode().strip()
        if not address:
            await self.stop()
            raise RuntimeError("the dev server exited before it printed its address")
        self._address = address
        self._port = int(address.rpartition(":")[2])

    async def kill(self) -> None:
        """SIGKILL the child (nothing is flushed or closed: a crash) and wait until it is gone."""
        process, self._process = self._process, None
        self._address = ""
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        if process.stdout is not None:
            await process.stdout.read()

    async def restart(self) -> None:
        """Start the child again on the same port (and data dir) after `kill` or `stop`."""
        await self.start()

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Send SIGTERM, wait up to ``grace_seconds``, then SIGKILL (idempotent)."""
        process, self._process = self._process, None
        self._address = ""
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), grace_seconds)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if process.stdout is not None:
            await process.stdout.read()

    async def advance(self, seconds: float | timedelta) -> float:
        """Move the child's clock forward.

        Args:
            seconds: How far, in seconds or as a ``timedelta``.

        Returns:
            The child's clock afterwards (Unix seconds).
        """
        amount = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        return await self._control("AdvanceClock", {"seconds": amount})

    async def now(self) -> float:
        """Return the child's clock (Unix seconds)."""
        return await self._control("Now", {})

    async def _control(self, method: str, payload: dict[str, float]) -> float:
        async with grpc.aio.insecure_channel(self.address) as channel:
            call = channel.unary_unary(f"/{CONTROL_SERVICE}/{method}")
            reply = json.loads(await call(json.dumps(payload).encode()))
        return float(reply["now"])

    async def __aenter__(self) -> "DevServerProcess":
        await self.start()
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
