"""Every ```python block of README.md and docs/*.md runs as pasted, each as a program of its own.

Each block runs in a fresh interpreter (``python -c``), in a scratch working directory, with
a timeout, and must exit 0. A block that talks to a Dex server names ``127.0.0.1:8801`` or
``localhost:8801`` (where ``dexcli dev`` and ``dex-agents dev-server`` listen); the test starts
the embedded dev server and puts its address there, and a fixed listening-Worker address
(``127.0.0.1:8803``) becomes a free loopback port, so parallel runs stay apart. Nothing else of
a block is changed. A block that is deliberately partial is not a ```python block (its fence
says ``text`` and its page says why).

A block that imports sagent needs Python 3.13+ and the ``[sagent]`` extra: where sagent is not
installed it is skipped with that reason, and ``tests/sagent/test_doc_samples.py`` runs it in
``.venv-sagent`` (``make sagent``, part of ``make check``).
"""

import asyncio
import importlib.util
import os
import re
import sys
from pathlib import Path

import attrs
import pytest

from dex_agents.devserver import DevServer
from dex_agents.infrastructure.dex.container import free_loopback_address

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
async def test_the_python_sample_runs_as_pasted(sample: Sample, tmp_path: Path) -> None:
    if sample.needs_sagent and importlib.util.find_spec("sagent") is None:
        pytest.skip("needs sagent (Python 3.13+): tests/sagent/test_doc_samples.py runs it in .venv-sagent")
    await run_sample(sample, tmp_path)


async def run_sample(sample: Sample, scratch: Path) -> None:
    """Run ``sample`` as a program in ``scratch`` (on a dev server of its own when it names one)."""
    code = sample.code.replace(LISTEN_ADDRESS, free_loopback_address())
    if not sample.needs_server:
        await _run(sample, code, scratch)
        return
    async with DevServer() as server:
        for address in SERVER_ADDRESSES:
            code = code.replace(address, server.address)
        await _run(sample, code, scratch)


async def _run(sample: Sample, code: str, scratch: Path) -> None:
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(scratch / "state"),  # the demo's agents keep their ledger there
        "DEX_AGENTS_DEMO_STATE": str(scratch / "demo"),
        "DEX_AGENTS_DEMO_CHUNK_DELAY": "0",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        cwd=scratch,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"{sample.name} did not finish in {TIMEOUT_SECONDS} s")
    assert process.returncode == 0, f"{sample.name} failed:\n{err.decode()[-3000:]}\n{out.decode()[-1000:]}"
