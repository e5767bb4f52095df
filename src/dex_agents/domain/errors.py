"""The error types of dex-agents, under one root.

The error policy in one line: what the model must see is a value (a failed or
rejected tool-call record, an RPC answering ``False``); what the engine must
retry raises. Runner contract violations raise `RunnerContractError`, illegal
record or session transitions raise `InvalidTransitionError`.
"""

from dex_agents.domain.limits import InputProblem
from dex_agents.domain.usage import AgentUsage


class DexAgentsError(Exception):
    """Root of every error dex-agents raises on purpose."""


class InvalidTransitionError(DexAgentsError):
    """A status change that the transition table does not allow."""


class RunnerContractError(DexAgentsError):
    """A framework runner returned something the runner contract forbids.

    Raised inside a Step, it fails that attempt like any other exception.
    """


class ToolExecutionError(DexAgentsError):
    """A tool failure the model should see.

    Raised by `AgentFrameworkRunner.execute_deferred_tool_call`, it is recorded
    as a ``failed`` tool call with this message and never retried.
    """

    def __init__(self, message: str, *, framework_state: str | None = None, usage: AgentUsage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.framework_state = framework_state
        """Runner-owned text that replaces the record's ``framework_state``; ``None`` keeps it."""
        self.usage = usage
        """The framework's model usage while the tool ran, as `ToolExecutionResult.usage`."""


class StepAttemptError(DexAgentsError):
    """A Step attempt failed with an error the engine would otherwise misreport.

    The message names the original exception's type; the original is the cause.
    """


class InvalidInputError(DexAgentsError, ValueError):
    """A client input the session refuses: nothing was sent or stored.

    ``problem`` says why (an `InputProblem`), ``field`` which input: for
    example ``"text"``, ``"initial_message"``, ``"rejection_message"``,
    ``"interrupt_id"`` or ``"session_id"``.
    """

    def __init__(self, message: str, *, problem: "InputProblem", field: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.field = field


class StepResultTooLargeError(DexAgentsError):
    """What a Step would write does not fit in one engine frame; the attempt fails instead of sending it."""


class DeliveryUnconfirmedError(DexAgentsError):
    """A single-attempt tool Step could not confirm that the engine stored its ``tool_call_started``.

    The tool did not run; the attempt fails and the call is recorded ``outcome_unknown``.
    """


class DeliveryLedgerUnavailableError(DeliveryUnconfirmedError):
    """The Worker has no way to read ``tool_call_started`` back (no Client): a set-up error, said with its fix.

    Raised before anything was announced, so the tool did not run: the call is
    recorded ``failed`` with this message (it is known not to have run), and the
    Worker logs it as an error.
    """


class ToolResultRefusedError(DexAgentsError):
    """``submit_tool_result`` did not accept the result: nothing was stored, the session goes on.

    ``tool_call_id`` is the call named. The subclasses say why.
    """

    def __init__(self, message: str, *, tool_call_id: str) -> None:
        super().__init__(message)
        self.tool_call_id = tool_call_id


class UnknownToolCallError(ToolResultRefusedError):
    """The session's active turn has no tool call with that ID (or no turn runs)."""


class ToolResultAlreadySubmittedError(ToolResultRefusedError):
    """The call has its result already: submitted before, expired at its deadline, or cancelled with its turn."""


class NotAwaitingToolResultError(ToolResultRefusedError):
    """The call does not wait for a result from outside: it waits for approval, or runs its own tool."""
