"""The Python samples of README.md and docs/*.md that need sagent, run as pasted like the others."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_doc_samples import SAMPLES, Sample, SampleRunner, run_sample

SAGENT_SAMPLES = [sample for sample in SAMPLES if sample.needs_sagent]


@pytest.fixture(scope="module")
def runner() -> Iterator[SampleRunner]:
    with SampleRunner() as started:
        yield started


def test_the_pages_hold_a_sagent_sample() -> None:
    assert SAGENT_SAMPLES


@pytest.mark.parametrize("sample", SAGENT_SAMPLES, ids=[sample.name for sample in SAGENT_SAMPLES])
async def test_the_sagent_sample_runs_as_pasted(sample: Sample, tmp_path: Path, runner: SampleRunner) -> None:
    await run_sample(sample, tmp_path, runner)
