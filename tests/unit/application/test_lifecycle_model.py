"""The model-based lifecycle test on the in-memory host: many random interleavings, in seconds.

See `tests.lifecycle.machine` for the rules and `tests.lifecycle.model` for what is checked.
"""

from hypothesis import HealthCheck, settings

from tests.lifecycle.machine import Backend, LifecycleMachine
from tests.lifecycle.memory import MemoryBackend


class InMemoryLifecycle(LifecycleMachine):
    def make_backend(self) -> Backend:
        return MemoryBackend()


InMemoryLifecycle.TestCase.settings = settings(
    max_examples=120, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_no_interleaving_on_the_in_memory_host_loses_or_corrupts_a_message = InMemoryLifecycle.TestCase
