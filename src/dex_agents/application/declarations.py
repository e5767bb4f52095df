"""One declaration per Step and per RPC: its use case, input, policy, what it may read and what it waits on.

Both hosts read this table and nothing else to know a Step: the Dex binding
derives each Step's `StepOptions` (loads, locks, retries, failure route) and
each RPC's decorator from it, and `InMemorySessionHost` refuses, within a Step
attempt or RPC call, every read the declaration does not cover, as Dex does
with ``AttributeMapNotLoadedError``. So adding a Step is its declaration plus
its use case, and adding a port read to a use case is its field plus its
declared `Load`.

A plain Attribute (the session state, pending interrupts, usage, steered
messages, the cancel request) is sent to every handler and needs no load;
what needs one is listed in `Load`. `Loaded` is what one attempt may read,
resolved from the declared loads and the movement that started it (its
window, its tool-call ID).
"""

from collections.abc import Mapping
from enum import StrEnum

import attrs

from dex_agents.application.next import StepInput, StepName
from dex_agents.application.policies import STEP_POLICIES, StepPolicy
from dex_agents.application.rpcs.cancel_turn import CancelTurn
from dex_agents.application.rpcs.get_agent_message_index import GetAgentMessageCount, GetAgentMessageIndex
from dex_agents.application.rpcs.get_agent_snapshot import GetAgentSnapshot
from dex_agents.application.rpcs.list_agent_messages import ListAgentMessages
from dex_agents.application.rpcs.resolve_interrupt import ResolveInterrupt
from dex_agents.application.rpcs.send_user_message import SendUserMessage
from dex_agents.application.rpcs.submit_tool_result import SubmitToolResult
from dex_agents.application.rpcs.withdraw_user_message import WithdrawUserMessage
from dex_agents.application.steps.await_tool_approval import AwaitToolApproval
from dex_agents.application.steps.await_user_message import AwaitUserMessage
from dex_agents.application.steps.call_tool import CallSingleAttemptTool, CallTool
from dex_agents.application.steps.compact_history import CompactHistory, RecordCompactionFailure
from dex_agents.application.steps.reconcile_tool_call import ReconcileToolCall
from dex_agents.application.steps.record_tool_failure import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents.application.steps.record_turn_failure import (
    RecordResumeFailure,
    RecordStartFailure,
    RecordTurnFailure,
)
from dex_agents.application.steps.resume_turn import ResumeTurn
from dex_agents.application.steps.run_model import RunModel
from dex_agents.application.steps.start_agent_session import StartAgentSession
from dex_agents.application.wiring import Wired
from dex_agents.domain.history import ModelWindow
from dex_agents.domain.start import AgentSessionStartInput


class Load(StrEnum):
    """Durable state a handler reads only when it declared it."""

    WINDOW = "window"
    """The messages and summary of the movement's model window; every message and summary when it names none."""
    CALL_HISTORY = "call_history"
    """For a call that reads the turn's history (the movement names its window): that window and the run state."""
    RUN_STATE = "run_state"
    """The framework run state of the turn waiting for tools."""
    TOOL_CALLS = "tool_calls"
    """Every tool-call record."""
    OWN_TOOL_CALL = "own_tool_call"
    """The record of the tool call the input names."""
    WAITING_MESSAGES = "waiting_messages"
    """The queued and steered user messages no turn has taken (their Channels' messages; an RPC only)."""
    CALLER_MESSAGES = "caller_messages"
    """The messages the RPC's caller chose to load; the others read as missing (a query RPC only)."""


class Lock(StrEnum):
    """State a handler holds a lock on while it runs, so a concurrent writer cannot overwrite its write."""

    INTERRUPTS = "interrupts"
    """``PENDING_INTERRUPTS``."""
    CANCEL_REQUEST = "cancel_request"
    """``TURN_CANCEL_REQUEST``."""


class Wait(StrEnum):
    """What a Step waits on before it runs."""

    NOTHING = "nothing"
    USER_MESSAGE = "user_message"
    """One steered, else one queued, user message."""
    APPROVAL = "approval"
    """The answer to the call's interrupt, or its deadline's Timer."""
    TOOL_RESULTS = "tool_results"
    """The input's number of tool results, and every steered message queued by then."""


@attrs.frozen(kw_only=True)
class Loaded:
    """What one Step attempt or RPC call may read, beyond plain Attributes.

    ``None`` for a collection means all of it.
    """

    messages: range | None = range(0)
    """Message sequences; ``None``: every message."""
    summaries: frozenset[int] | None = frozenset()
    """Summary numbers; ``None``: every summary."""
    run_state: bool = False
    tool_calls: frozenset[str] | None = frozenset()
    """Tool-call IDs; ``None``: every record."""
    waiting_messages: bool = False
    """The queued and steered messages' contents (their count is always known)."""
    caller_messages: bool = False
    """The messages read are those the caller loaded: an unloaded one reads as missing, it does not fail."""

    def allows_message(self, sequence: int) -> bool:
        """Whether message ``sequence`` is loaded."""
        return self.messages is None or sequence in self.messages

    def allows_summary(self, number: int) -> bool:
        """Whether summary ``number`` is loaded."""
        return self.summaries is None or number in self.summaries

    def allows_tool_call(self, tool_call_id: str) -> bool:
        """Whether the record of ``tool_call_id`` is loaded."""
        return self.tool_calls is None or tool_call_id in self.tool_calls


EVERYTHING = Loaded(messages=None, summaries=None, run_state=True, tool_calls=None, waiting_messages=True)
"""What a reader outside any Step or RPC sees (a test asserting end state)."""


def _loaded(loads: frozenset[Load], *, window: ModelWindow | None, tool_call_id: str | None) -> Loaded:
    messages: range | None = range(0)
    summaries: frozenset[int] | None = frozenset()
    run_state = Load.RUN_STATE in loads
    history = window if Load.WINDOW in loads or Load.CALL_HISTORY in loads else None
    if Load.WINDOW in loads and window is None:
        messages, summaries = None, None
    elif history is not None:
        messages = history.sequences
        summaries = frozenset() if history.summary_number is None else frozenset({history.summary_number})
        run_state = run_state or Load.CALL_HISTORY in loads
    tool_calls: frozenset[str] | None = frozenset()
    if Load.TOOL_CALLS in loads:
        tool_calls = None
    elif Load.OWN_TOOL_CALL in loads and tool_call_id is not None:
        tool_calls = frozenset({tool_call_id})
    caller = Load.CALLER_MESSAGES in loads
    return Loaded(
        messages=None if caller else messages,
        summaries=summaries,
        run_state=run_state,
        tool_calls=tool_calls,
        waiting_messages=Load.WAITING_MESSAGES in loads,
        caller_messages=caller,
    )


@attrs.frozen(kw_only=True)
class StepDeclaration:
    """One Step of the session Flow, as every host runs it."""

    name: StepName
    use_case: type[Wired]
    """The use case the Step builds (with ``wired``) and runs."""
    input: type[object]
    """Its input's type: ``NoneType``, a tool-call ID (``str``), a result count, the start input, a reason."""
    loads: frozenset[Load] = frozenset()
    """What ``execute`` may read beyond plain Attributes."""
    wait_loads: frozenset[Load] = frozenset()
    """What ``wait_for`` may read beyond plain Attributes."""
    locks: frozenset[Lock] = frozenset()
    """What ``execute`` locks."""
    waits_on: Wait = Wait.NOTHING

    @property
    def policy(self) -> StepPolicy:
        """Its attempts, timeouts and failure route (`STEP_POLICIES`)."""
        return STEP_POLICIES[self.name]

    @property
    def takes_tool_call(self) -> bool:
        """Whether its input is a tool-call ID whose record it loads (its movements are per call)."""
        return Load.OWN_TOOL_CALL in self.loads

    def loaded(self, *, window: ModelWindow | None = None, step_input: StepInput = None) -> Loaded:
        """What ``execute`` may read when a movement with ``window`` and ``step_input`` started it."""
        tool_call_id = step_input if self.takes_tool_call and isinstance(step_input, str) else None
        return _loaded(self.loads, window=window, tool_call_id=tool_call_id)

    def wait_loaded(self, *, step_input: StepInput = None) -> Loaded:
        """What ``wait_for`` may read for ``step_input``."""
        tool_call_id = step_input if isinstance(step_input, str) else None
        return _loaded(self.wait_loads, window=None, tool_call_id=tool_call_id)


_WINDOW_STEP = frozenset({Load.WINDOW, Load.RUN_STATE, Load.TOOL_CALLS})
"""``RunModel`` gives the runner the window, run state and records; ``CompactHistory`` may end a cancelled turn
(`TurnCloser.end_cancelled` clears the run state and records)."""
_TOOL_STEP = frozenset({Load.OWN_TOOL_CALL, Load.CALL_HISTORY})
_PER_CALL = frozenset({Load.OWN_TOOL_CALL})
_TURN_RECORDS = frozenset({Load.TOOL_CALLS})
_TURN_FAILURE = frozenset({Load.TOOL_CALLS, Load.RUN_STATE})
"""A failure route ends the turn (`TurnCloser.fail`): it deletes the records and the run state (it lists its parts)."""
_NO_INPUT: type[object] = type(None)

STEP_DECLARATIONS: Mapping[StepName, StepDeclaration] = {
    declaration.name: declaration
    for declaration in (
        StepDeclaration(name=StepName.START_AGENT_SESSION, use_case=StartAgentSession, input=AgentSessionStartInput),
        StepDeclaration(
            name=StepName.AWAIT_USER_MESSAGE, use_case=AwaitUserMessage, input=_NO_INPUT, waits_on=Wait.USER_MESSAGE
        ),
        StepDeclaration(name=StepName.RUN_MODEL, use_case=RunModel, input=_NO_INPUT, loads=_WINDOW_STEP),
        StepDeclaration(
            name=StepName.AWAIT_TOOL_APPROVAL,
            use_case=AwaitToolApproval,
            input=str,
            loads=_PER_CALL,
            wait_loads=_PER_CALL,
            locks=frozenset({Lock.INTERRUPTS}),
            waits_on=Wait.APPROVAL,
        ),
        StepDeclaration(name=StepName.CALL_TOOL, use_case=CallTool, input=str, loads=_TOOL_STEP),
        StepDeclaration(
            name=StepName.CALL_SINGLE_ATTEMPT_TOOL, use_case=CallSingleAttemptTool, input=str, loads=_TOOL_STEP
        ),
        StepDeclaration(name=StepName.RECORD_TOOL_FAILURE, use_case=RecordToolFailure, input=str, loads=_PER_CALL),
        StepDeclaration(
            name=StepName.RECORD_TOOL_OUTCOME_UNKNOWN, use_case=RecordToolOutcomeUnknown, input=str, loads=_PER_CALL
        ),
        StepDeclaration(name=StepName.RECONCILE_TOOL_CALL, use_case=ReconcileToolCall, input=str, loads=_PER_CALL),
        StepDeclaration(
            name=StepName.RESUME_TURN,
            use_case=ResumeTurn,
            input=int,
            loads=_TURN_RECORDS,
            waits_on=Wait.TOOL_RESULTS,
        ),
        StepDeclaration(
            name=StepName.RECORD_TURN_FAILURE, use_case=RecordTurnFailure, input=_NO_INPUT, loads=_TURN_FAILURE
        ),
        StepDeclaration(
            name=StepName.RECORD_RESUME_FAILURE, use_case=RecordResumeFailure, input=int, loads=_TURN_FAILURE
        ),
        StepDeclaration(
            name=StepName.RECORD_START_FAILURE,
            use_case=RecordStartFailure,
            input=AgentSessionStartInput,
            loads=_TURN_FAILURE,
        ),
        StepDeclaration(name=StepName.COMPACT_HISTORY, use_case=CompactHistory, input=str, loads=_WINDOW_STEP),
        StepDeclaration(
            name=StepName.RECORD_COMPACTION_FAILURE,
            use_case=RecordCompactionFailure,
            input=str,
            loads=_TURN_FAILURE,
        ),
    )
}
"""Every Step of the session Flow, ``StartAgentSession`` first."""


class RpcName(StrEnum):
    """The session Flow's RPCs; the values are the engine's RPC names."""

    SEND_USER_MESSAGE = "send_user_message"
    WITHDRAW_USER_MESSAGE = "withdraw_user_message"
    CANCEL_TURN = "cancel_turn"
    RESOLVE_INTERRUPT = "resolve_interrupt"
    SUBMIT_TOOL_RESULT = "submit_tool_result"
    GET_AGENT_SNAPSHOT = "get_agent_snapshot"
    LIST_AGENT_MESSAGES = "list_agent_messages"
    GET_AGENT_MESSAGE_INDEX = "get_agent_message_index"
    GET_AGENT_MESSAGE_COUNT = "get_agent_message_count"


@attrs.frozen(kw_only=True)
class RpcDeclaration:
    """One RPC of the session Flow, as every host runs it."""

    name: RpcName
    use_case: type[Wired]
    loads: frozenset[Load] = frozenset()
    locks: frozenset[Lock] = frozenset()
    transactional: bool = False
    """Whether it asks the engine for transactional reads and writes though it holds no lock."""

    def loaded(self) -> Loaded:
        """What the RPC may read."""
        return _loaded(self.loads, window=None, tool_call_id=None)


_INTERRUPTS = frozenset({Lock.INTERRUPTS})
_WAITING = frozenset({Load.WAITING_MESSAGES})

RPC_DECLARATIONS: Mapping[RpcName, RpcDeclaration] = {
    declaration.name: declaration
    for declaration in (
        RpcDeclaration(name=RpcName.SEND_USER_MESSAGE, use_case=SendUserMessage, transactional=True),
        RpcDeclaration(
            name=RpcName.WITHDRAW_USER_MESSAGE, use_case=WithdrawUserMessage, loads=_WAITING, transactional=True
        ),
        RpcDeclaration(
            name=RpcName.CANCEL_TURN, use_case=CancelTurn, locks=frozenset({Lock.INTERRUPTS, Lock.CANCEL_REQUEST})
        ),
        RpcDeclaration(name=RpcName.RESOLVE_INTERRUPT, use_case=ResolveInterrupt, locks=_INTERRUPTS),
        RpcDeclaration(
            name=RpcName.SUBMIT_TOOL_RESULT, use_case=SubmitToolResult, loads=_TURN_RECORDS, locks=_INTERRUPTS
        ),
        RpcDeclaration(
            name=RpcName.GET_AGENT_SNAPSHOT,
            use_case=GetAgentSnapshot,
            loads=frozenset({Load.TOOL_CALLS, Load.WAITING_MESSAGES, Load.CALLER_MESSAGES}),
        ),
        RpcDeclaration(
            name=RpcName.LIST_AGENT_MESSAGES, use_case=ListAgentMessages, loads=frozenset({Load.CALLER_MESSAGES})
        ),
        RpcDeclaration(name=RpcName.GET_AGENT_MESSAGE_INDEX, use_case=GetAgentMessageIndex),
        RpcDeclaration(name=RpcName.GET_AGENT_MESSAGE_COUNT, use_case=GetAgentMessageCount),
    )
}
"""Every RPC of the session Flow."""
