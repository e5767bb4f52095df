"""Fixtures every engine-backed test shares: the backend each case runs on."""

import os
from pathlib import Path

import pytest

from dex_agents.testing.stack import DEXCLI_ENV, Backend

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""Where Worker children run from, so they import ``tests.…`` modules."""

_NO_DEXCLI = f"no real Dex server: set {DEXCLI_ENV} to a dexcli binary to run this case on 'dexcli dev'"


@pytest.fixture(
    params=[
        "fake",
        pytest.param("dexcli", marks=pytest.mark.skipif(not os.environ.get(DEXCLI_ENV), reason=_NO_DEXCLI)),
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each case runs on fake Dex, and on a private ``dexcli dev`` when ``DEXCLI`` is set."""
    value: Backend = request.param
    return value
