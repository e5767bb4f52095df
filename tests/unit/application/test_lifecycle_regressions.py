"""Interleavings the model-based lifecycle test found, kept as plain tests (in-memory host).

Each replays the rules of the failing example on `MemoryBackend` and checks what the machine checks.
"""

from dex_agents.domain.messages import MessageDelivery
from tests.lifecycle.memory import MemoryBackend
from tests.lifecycle.model import Sent, check_safety, check_settled


def send(backend: MemoryBackend, sent: list[Sent], text: str, delivery: MessageDelivery) -> None:
    tag = text.partition(" ")[0]
    message = Sent(tag=tag, text=text, delivery=delivery, client_message_id=f"id-{tag}")
    message.accepted = bool(backend.run(backend.send(text, delivery=delivery, client_message_id=f"id-{tag}")))
    sent.append(message)


def settle_and_check(backend: MemoryBackend, sent: list[Sent]) -> None:
    backend.run(backend.settle())
    observed = backend.run(backend.observe())
    check_safety(sent, observed)
    check_settled(sent, observed)


def test_a_message_steered_into_a_turn_whose_model_then_fails_is_stored_with_that_turn() -> None:
    backend, sent = MemoryBackend(), list[Sent]()
    send(backend, sent, "m1 a;a!", MessageDelivery.QUEUE)
    backend.run(backend.advance(0))  # the turn starts: its first model call asks for an approval
    send(backend, sent, "m2", MessageDelivery.STEER)

    settle_and_check(backend, sent)  # approved; the call that read m2 asks again; the last call fails

    history = backend.run(backend.observe()).history
    assert [m.text for m in history][:2] == ["m1 a;a!", "m2"]
    backend.close()


def test_a_message_steered_into_a_failing_turn_and_then_withdrawn_never_reaches_a_model_call() -> None:
    for steps_before_withdrawal in range(4):
        backend, sent = MemoryBackend(), list[Sent]()
        send(backend, sent, "m1 r!", MessageDelivery.QUEUE)
        backend.run(backend.advance(0))  # the turn starts; its last model call will fail
        send(backend, sent, "m2", MessageDelivery.STEER)
        for _ in range(steps_before_withdrawal):
            backend.run(backend.advance(0))
        sent[1].withdrawn = backend.run(backend.withdraw("id-m2"))

        settle_and_check(backend, sent)  # no withdrawn message stored or read by a model call

        stored = [m.text for m in backend.run(backend.observe()).history]
        assert ("m2" in stored) is not sent[1].withdrawn, f"after {steps_before_withdrawal} steps: {stored}"
        backend.close()


def test_a_steered_message_withdrawn_after_two_engine_steps_behind_a_failed_turn_never_reaches_a_model_call() -> None:
    backend, sent = MemoryBackend(), list[Sent]()
    backend.run(backend.advance(0))
    backend.run(backend.advance(0))
    send(backend, sent, "m1 ", MessageDelivery.QUEUE)
    send(backend, sent, "m2 c,c!", MessageDelivery.QUEUE)  # two crashing tools, then its last model call fails
    backend.run(backend.advance(0))
    send(backend, sent, "m3 ", MessageDelivery.QUEUE)
    for _ in range(3):
        backend.run(backend.advance(0))
    send(backend, sent, "m4 ", MessageDelivery.QUEUE)
    for _ in range(2):
        backend.run(backend.advance(0))
    send(backend, sent, "m5 ", MessageDelivery.STEER)
    for _ in range(2):
        backend.run(backend.advance(0))
    sent[4].withdrawn = backend.run(backend.withdraw("id-m5"))

    settle_and_check(backend, sent)
    backend.close()
