"""The spec's example program runs against the dev server and prints the answer after approving the refund."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dex_agents.testing import DevServer
from tests.integration.conftest import PROJECT_ROOT

pytestmark = pytest.mark.integration


async def test_the_spec_example_program_approves_the_refund_and_prints_the_final_answer(tmp_path: Path) -> None:
    async with DevServer() as fake:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
        }
        program = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.pydantic_ai.spec_example",
            fake.address,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(program.communicate(), timeout=60)
    lines = output.decode().splitlines()
    assert program.returncode == 0, output.decode()
    assert lines == [
        'approving refund_order {"order_id":"7"}',
        'approving email_customer {"order_id":"7","text":"Your order 7 is refunded (refund-1 issued for order 7)."}',
        "Done: refund-1 issued for order 7; emailed the customer of order 7.",
    ]
