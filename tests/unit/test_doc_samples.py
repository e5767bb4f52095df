"""Every ```python block of README.md and docs/*.md runs as pasted, each as a program of its own.

Each block runs as a program of its own, in a scratch working directory, with a timeout, and
must exit 0. A block that talks to a Dex server names ``127.0.0.1:8801`` or
``localhost:8801`` (where ``dexcli dev`` and ``dex-agents dev-server`` listen); the test starts
the embedded dev server and puts its address there, and a fixed listening-Worker address
(``127.0.0.1:8803``) becomes a free loopback port, so parallel runs stay apart. Nothing else of
a block is changed. A block that is deliberately partial is not a ```python block (its fence
says ``text`` and its page says why).

A block that imports sagent needs Python 3.13+ and the ``[sagent]`` extra: where sagent is not
installed it is skipped with that reason, and ``tests/sagent/test_doc_samples.py`` runs it in
``.venv-sagent`` (``make sagent``, part of ``make check``).

Each block is a fresh process forked from one interpreter that imported the library already
(`tests/unit/sample_runner.py`): an interpreter's imports cost more CPU than most blocks take to
run. The block still starts from an empty ``__main__``, so a missing import still fails.
"""

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from dex_agents.devserver import DevServer
from dex_agents.infrastructure.dex.container import free_listen_address

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().with_name("sample_runner.py")
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
SERVER_ADDRESSES = ("127.0.0.1:8801", "localhost:8801")
LISTEN_ADDRESS = "127.0.0.1:8803"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
TIMEOUT_SECONDS = 120


@attrs.frozen
class Sample:
    page: Path
    line: int
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def needs_server(self) -> bool:
        return any(address in self.code for address in SERVER_ADDRESSES)

    @property
    def needs_sagent(self) -> bool:
        return re.search(r"^\s*(from|import) sagent\b", self.code, re.MULTILINE) is not None


def samples() -> list[Sample]:
    found: list[Sample] = []
    for page in PAGES:
        text = page.read_text()
        found.extend(Sample(page, text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text))
    return found


SAMPLES = samples()


def test_the_pages_hold_python_samples_and_every_one_is_collected() -> None:
    fences = sum(page.read_text().count("```python\n") for page in PAGES)
    assert len(SAMPLES) == fences > 0


class SampleRunner:
    """The `sample_runner` process: one request at a time, from any thread."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._lock = threading.Lock()

    def run(self, code: str, cwd: Path, env: dict[str, str]) -> dict[str, object]:
        request = {"code": code, "cwd": str(cwd), "env": env, "timeout": TIMEOUT_SECONDS}
        with self._lock:
            assert self._process.stdin is not None
            assert self._process.stdout is not None
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            reply: dict[str, object] = json.loads(self._process.stdout.readline())
        return reply

    def __enter__(self) -> "SampleRunner":
        return self

    def __exit__(self, *_: object) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()  # the runner ends at the end of its input
        self._process.wait(timeout=30)
        assert self._process.stdout is not None
        self._process.stdout.close()


@pytest.fixture(scope="module")
def runner() -> Iterator[SampleRunner]:
    with SampleRunner() as started:
        yield started


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
async def test_the_python_sample_runs_as_pasted(sample: Sample, tmp_path: Path, runner: SampleRunner) -> None:
    if sample.needs_sagent and importlib.util.find_spec("sagent") is None:
        pytest.skip("needs sagent (Python 3.13+): tests/sagent/test_doc_samples.py runs it in .venv-sagent")
    await run_sample(sample, tmp_path, runner)


async def run_sample(sample: Sample, scratch: Path, runner: SampleRunner) -> None:
    """Run ``sample`` as a program in ``scratch`` (on a dev server of its own when it names one)."""
    code = sample.code.replace(LISTEN_ADDRESS, free_listen_address())
    if not sample.needs_server:
        await _run(sample, code, scratch, runner)
        return
    async with DevServer() as server:
        for address in SERVER_ADDRESSES:
            code = code.replace(address, server.address)
        await _run(sample, code, scratch, runner)


async def _run(sample: Sample, code: str, scratch: Path, runner: SampleRunner) -> None:
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(scratch / "state"),  # the demo's agents keep their ledger there
        "DEX_AGENTS_DEMO_STATE": str(scratch / "demo"),
        "DEX_AGENTS_DEMO_CHUNK_DELAY": "0",
    }
    # In a thread: the dev server a sample talks to runs on this event loop.
    reply = await asyncio.to_thread(runner.run, code, scratch, env)
    if reply["returncode"] is None:
        pytest.fail(f"{sample.name} did not finish in {TIMEOUT_SECONDS} s")
    assert reply["returncode"] == 0, (
        f"{sample.name} failed:\n{str(reply['stderr'])[-3000:]}\n{str(reply['stdout'])[-1000:]}"
    )
