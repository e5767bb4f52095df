"""The model-based lifecycle test on the dev server with real Worker children, through `AgentSessionClient`.

The machine of `tests.lifecycle.machine` drives one session per example on a
stack shared by the module; the engine's own concurrency interleaves the
Steps with what the client does. The second run also shoots the Worker (SIGKILL,
now or at the session's next event, which a Step writes) and starts a
replacement, at most once per example. Both are short here (``make check``);
``$DEX_AGENTS_LIFECYCLE_EXAMPLES`` runs more examples for a soak.
"""

import os
from collections.abc import Iterator
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test

from tests.integration.conftest import PROJECT_ROOT
from tests.lifecycle.engine import EngineBackend, EngineStack, engine_stack
from tests.lifecycle.machine import Backend, LifecycleMachine

pytestmark = pytest.mark.integration

EXAMPLES_ENV = "DEX_AGENTS_LIFECYCLE_EXAMPLES"


def run_settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=int(os.environ.get(EXAMPLES_ENV, examples)),
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineStack]:
    with engine_stack(tmp_path_factory.mktemp("lifecycle"), PROJECT_ROOT) as stack:
        yield stack


class EngineLifecycle(LifecycleMachine):
    engine: ClassVar[EngineStack | None] = None

    def make_backend(self) -> Backend:
        assert self.engine is not None
        return EngineBackend(self.engine)


class ShotWorkerLifecycle(EngineLifecycle):
    def __init__(self) -> None:
        super().__init__()
        self.shots = 0

    @precondition(lambda self: self.shots == 0)
    @rule(at_next_event=st.booleans())
    def shoot_the_worker(self, at_next_event: bool) -> None:
        self.shots += 1
        backend = self.backend
        assert isinstance(backend, EngineBackend)
        self._run(backend.kill_worker(at_next_event=at_next_event))


def test_no_interleaving_on_the_dev_server_with_real_workers_loses_or_corrupts_a_message(engine: EngineStack) -> None:
    EngineLifecycle.engine = engine
    run_state_machine_as_test(EngineLifecycle, settings=run_settings(examples=6, steps=20))


def test_no_interleaving_loses_or_corrupts_a_message_when_the_worker_is_shot_at_a_step(engine: EngineStack) -> None:
    ShotWorkerLifecycle.engine = engine
    run_state_machine_as_test(ShotWorkerLifecycle, settings=run_settings(examples=3, steps=14))
