"""The input of a new session."""

import attrs


@attrs.frozen(kw_only=True)
class AgentSessionStartInput:
    """What starts a session: an optional first user message."""

    initial_message: str | None = None
    """The first turn's text; blank or ``None`` starts no turn."""

    @property
    def starts_a_turn(self) -> bool:
        """Whether the session runs a turn right away."""
        return self.initial_message is not None and bool(self.initial_message.strip())
