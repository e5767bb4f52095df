"""Model usage and its sums.

A turn's usage counts its model calls and also the framework's own model calls made while a tool
ran (a sub-agent sharing the run's usage): a tool Step reports those (`ToolExecutionResult.usage`),
and ``ResumeTurn`` adds them to the session's when it takes the call's result (the call's own Step, for a
response's one call).
"""

import attrs


@attrs.frozen(kw_only=True)
class AgentUsage:
    """Model usage of one model call, or summed over a session (``AGENT_USAGE``)."""

    model_calls: int = 0
    """Requests made to the model."""
    input_tokens: int = 0
    """Input tokens, cached ones included."""
    output_tokens: int = 0
    """Output tokens, reasoning ones included."""
    cached_input_tokens: int = 0
    """Input tokens read from the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning."""
    cost_usd: float = 0.0
    """What the calls cost in US dollars, when the framework prices them (the sagent runner does); else 0."""
    tool_calls: int = 0
    """Tool calls that ran and returned, as the framework counts them (the Pydantic AI runner does); else 0."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: "AgentUsage") -> "AgentUsage":
        return AgentUsage(
            model_calls=self.model_calls + other.model_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            tool_calls=self.tool_calls + other.tool_calls,
        )

    @property
    def is_zero(self) -> bool:
        """Whether nothing was used."""
        return self == _ZERO


_ZERO = AgentUsage()
