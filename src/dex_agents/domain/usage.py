"""Model usage and its sums."""

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
        )
