"""Live text of a session, grouped the way the core's event rule says.

A UI groups ``text_delta`` and ``reasoning_delta`` events by
``(turn_id, step_execution_id, attempt)``. Within one Step execution only the
highest attempt counts: a delta of a higher attempt discards the partial text
of the lower ones, and a late delta of a lower attempt is dropped. Different
Step executions of a turn are separate blocks and each keeps its text. After
``turn_completed`` or ``turn_failed`` the stored messages replace the turn's
live text (`LiveText.end_turn`).

This module holds only that bookkeeping; `dex_agents.cli.render` draws it.
"""

from enum import StrEnum

import attrs

from dex_agents.domain.events import AgentEvent, AgentEventType, ReasoningDeltaPayload, TextDeltaPayload


class TextKind(StrEnum):
    """What a block of live text is."""

    TEXT = "text"
    REASONING = "reasoning"


class DeltaOutcome(StrEnum):
    """What one delta did to the live text."""

    APPENDED = "appended"
    """Added to the block of its Step execution (which it may have opened)."""
    REPLACED = "replaced"
    """Opened a higher attempt: the lower attempt's partial text is discarded."""
    DROPPED = "dropped"
    """Belonged to a lower attempt than one already seen: ignored."""


@attrs.define(kw_only=True)
class TextBlock:
    """The live text of one Step execution (its highest attempt so far)."""

    turn_id: str | None
    """The turn."""
    step_execution_id: str
    """The Step execution that wrote it."""
    attempt: int
    """The highest attempt seen."""
    kind: TextKind
    """Text or reasoning."""
    text: str = ""
    """What that attempt has written so far."""
    discarded_attempts: tuple[int, ...] = ()
    """Lower attempts whose partial text this block replaced."""

    @property
    def key(self) -> tuple[str | None, str, TextKind]:
        """The block's identity: one per Step execution and kind."""
        return (self.turn_id, self.step_execution_id, self.kind)


@attrs.frozen(kw_only=True)
class DeltaResult:
    """The effect of one delta."""

    outcome: DeltaOutcome
    """What happened."""
    block: TextBlock | None
    """The block the delta went to (``None`` when dropped)."""
    replaced_text: str = ""
    """The lower attempt's discarded text, when ``outcome`` is ``REPLACED``."""


_KINDS = {AgentEventType.TEXT_DELTA: TextKind.TEXT, AgentEventType.REASONING_DELTA: TextKind.REASONING}


def is_text_event(event: AgentEvent) -> bool:
    """Whether ``event`` is a ``text_delta`` or ``reasoning_delta``."""
    return event.type in _KINDS


class LiveText:
    """The live text of every turn, by ``(turn_id, step_execution_id, attempt)``."""

    def __init__(self) -> None:
        self._blocks: dict[tuple[str | None, str, TextKind], TextBlock] = {}

    def apply(self, event: AgentEvent) -> DeltaResult:
        """Apply one text or reasoning delta.

        Raises:
            ValueError: ``event`` is not a text or reasoning delta.
        """
        payload = event.payload
        if not isinstance(payload, TextDeltaPayload | ReasoningDeltaPayload):
            raise ValueError(f"not a text event: {event.type.value}")
        kind = _KINDS[event.type]
        delta = payload.text
        key = (event.turn_id, event.step_execution_id, kind)
        block = self._blocks.get(key)
        if block is None:
            block = TextBlock(
                turn_id=event.turn_id,
                step_execution_id=event.step_execution_id,
                attempt=event.attempt,
                kind=kind,
                text=delta,
            )
            self._blocks[key] = block
            return DeltaResult(outcome=DeltaOutcome.APPENDED, block=block)
        if event.attempt < block.attempt:
            return DeltaResult(outcome=DeltaOutcome.DROPPED, block=None)
        if event.attempt > block.attempt:
            replaced = block.text
            block.discarded_attempts = (*block.discarded_attempts, block.attempt)
            block.attempt = event.attempt
            block.text = delta
            return DeltaResult(outcome=DeltaOutcome.REPLACED, block=block, replaced_text=replaced)
        block.text += delta
        return DeltaResult(outcome=DeltaOutcome.APPENDED, block=block)

    def blocks(self, turn_id: str | None) -> list[TextBlock]:
        """Return the turn's blocks in the order they opened (highest attempts only)."""
        return [block for block in self._blocks.values() if block.turn_id == turn_id]

    def text(self, turn_id: str | None, kind: TextKind = TextKind.TEXT) -> str:
        """Return the turn's live text of ``kind``: its blocks joined by blank lines."""
        return "\n\n".join(block.text for block in self.blocks(turn_id) if block.kind is kind and block.text)

    def end_turn(self, turn_id: str | None) -> list[TextBlock]:
        """Forget the turn's live text (its stored messages replace it) and return it."""
        ended = self.blocks(turn_id)
        for block in ended:
            del self._blocks[block.key]
        return ended
