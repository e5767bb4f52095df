"""What ``dex-agents chat`` shows when it joins a session, and how it answers approvals.

`joined_lines` is what ``chat --session ID`` prints for a session that exists:
its status, each pending approval with the commands that answer it
(``/approve ID``, ``/reject ID reason``) and the waiting messages.
`ChatApprovals` asks the person about each approval the session raises and
carries out those two commands (`AnswerCommand`). While it waits for an answer
it watches the approval (`answered_elsewhere`), so a prompt notices that
someone answered it from another place (``watch``, the web console, another
chat) and stops asking. An answer other than yes rejects, with the person's
words as the reason (`dex_agents.cli.terminal.approval_decision`).
"""

import asyncio

import attrs
import dex
from rich.console import Console
from rich.text import Text

from dex_agents.cli.follow import ApprovalDecision, ApprovalRequest, SessionFollower
from dex_agents.cli.terminal import LineSource, approval_decision, approval_question
from dex_agents.cli.views import compact_json, one_line, queue_lines
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import AgentToolCall, call_digest
from dex_agents.infrastructure.dex.client import AgentSessionClient

ELSEWHERE_RECHECK_SECONDS = 0.5
"""How often a waiting approval prompt checks whether the approval was answered elsewhere."""

ANSWER_USAGE = "/approve ID or /reject ID reason"


@attrs.frozen(kw_only=True)
class AnswerCommand:
    """``/approve ID`` or ``/reject ID reason`` as typed."""

    approved: bool
    interrupt_id: str
    reason: str | None = None

    @classmethod
    def parse(cls, text: str) -> "AnswerCommand | None":
        """The command in ``text``; ``None`` when it is neither command.

        Raises:
            ValueError: it is one of them without an ID (the message says how to type it).
        """
        verb, _, rest = text.strip().partition(" ")
        verb = verb.lower()
        if verb not in ("/approve", "/reject"):
            return None
        interrupt_id, _, reason = rest.strip().partition(" ")
        if not interrupt_id or (verb == "/approve" and reason.strip()):
            raise ValueError(f"type {ANSWER_USAGE} (the ID is the pending approval's, e.g. turn-1.call-2)")
        return cls(approved=verb == "/approve", interrupt_id=interrupt_id, reason=reason.strip() or None)


def joined_lines(session_id: str, snapshot: AgentSnapshot, *, running: bool) -> list[Text]:
    """What the chat prints when it joins an existing session (``running``: it takes messages)."""
    state = snapshot.state
    if not running:
        status = "has ended (its history stays readable: /history, /snapshot)"
    elif state is None:
        status = "is starting"
    else:
        turns = "turn" if state.turn_count == 1 else "turns"
        messages = "message" if state.message_count == 1 else "messages"
        doing = state.status.value.replace("_", " ")
        status = f"is {doing} · {state.turn_count} {turns} · {state.message_count} {messages}"
        if state.active_turn_id is not None:
            status += f" · {state.active_turn_id} running (shown below from its start)"
    lines = [Text(f"session {session_id} {status}", style="bold")]
    if state is not None and state.last_turn_error and state.active_turn_id is None:
        lines.append(Text(f"its last turn failed: {one_line(state.last_turn_error)}", style="red"))
    lines.extend(
        Text(f"pending approval {interrupt.interrupt_id}: ", style="yellow")
        + Text(f"{interrupt.tool_name} {compact_json(interrupt.arguments)}")
        + Text(f"  (/approve {interrupt.interrupt_id} · /reject {interrupt.interrupt_id} reason)", style="dim")
        for interrupt in snapshot.pending_interrupts
    )
    lines.extend(queue_lines(snapshot))
    return lines


def answered_line(interrupt_id: str, record: AgentToolCall | None) -> Text:
    """The line a prompt prints when its approval was answered elsewhere."""
    if record is None or record.approval is None:
        said = ""
    else:
        said = f": {record.approval.value}" + (f" by {record.approver}" if record.approver else "")
    return Text(f"⤳ {interrupt_id} was answered elsewhere{said}", style="yellow")


async def answered_elsewhere(sessions: AgentSessionClient, session_id: str, interrupt_id: str) -> AgentToolCall | None:
    """Return once ``interrupt_id`` is no longer pending, with its call's record if the snapshot still has it."""
    while True:
        await asyncio.sleep(ELSEWHERE_RECHECK_SECONDS)
        try:
            snapshot = await sessions.get_agent_snapshot(session_id)
        except dex.DexServiceError:
            continue  # a passing failure: the next check tells
        if all(i.interrupt_id != interrupt_id for i in snapshot.pending_interrupts):
            return next((r for r in snapshot.tool_calls if r.interrupt_id == interrupt_id), None)


@attrs.define
class ChatApprovals:
    """The chat's approvals: the question at the prompt, and ``/approve ID`` / ``/reject ID reason``."""

    sessions: AgentSessionClient
    session_id: str
    console: Console
    lines: LineSource
    follower: SessionFollower
    shown: dict[str, str] = attrs.field(factory=dict, init=False)
    """The digest of each pending call this chat printed whole, by interrupt ID (what an approval binds to)."""
    _answer: asyncio.Future[str | None] | None = attrs.field(default=None, init=False)
    _asking: ApprovalRequest | None = attrs.field(default=None, init=False)

    def printed(self, snapshot: AgentSnapshot) -> None:
        """Note the snapshot's pending approvals as printed whole (`joined_lines`)."""
        for interrupt in snapshot.pending_interrupts:
            self.shown[interrupt.interrupt_id] = call_digest(interrupt.tool_name, interrupt.arguments)

    def take_answer(self, line: str) -> bool:
        """Give ``line`` to the question waiting at the prompt; ``False`` when none waits."""
        if self._answer is None or self._answer.done():
            return False
        self._answer.set_result(line)
        return True

    def drop_question(self) -> None:
        """Stop asking (a cancel, or leaving): the question waiting, if any, gets no answer."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)

    async def ask(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """Ask while lines are read concurrently: the next line answers (`take_answer`).

        Meanwhile the approval is watched: answered elsewhere (or by ``/approve ID``), the question is dropped.
        """
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._answer, self._asking = answer, request
        self.shown[request.interrupt_id] = request.call_digest
        self.console.print(Text(approval_question(request)), end="")
        self.console.print()
        watching = asyncio.create_task(answered_elsewhere(self.sessions, self.session_id, request.interrupt_id))
        try:
            await asyncio.wait((answer, watching), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._answer = self._asking = None
            watching.cancel()
        if not answer.done():
            answer.cancel()
            self.console.print(answered_line(request.interrupt_id, watching.result()))
            return None
        typed = answer.result()
        return None if typed is None else approval_decision(typed)  # None: cancelled, left or answered by ID

    async def ask_in_turn(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """Ask when lines are read one turn at a time: the next line answers (``/approve ID`` too)."""
        self.shown[request.interrupt_id] = request.call_digest
        typed = await self.lines.readline(approval_question(request))
        try:
            command = None if typed is None else AnswerCommand.parse(typed)
        except ValueError as error:
            self.console.print(Text(str(error), style="red"))
            return None
        if command is None:
            return approval_decision(typed)
        if command.interrupt_id != request.interrupt_id:
            await self.answer_by_id(typed or "")
            return None
        return ApprovalDecision(approved=command.approved, rejection_message=command.reason)

    async def answer_by_id(self, text: str) -> None:
        """``/approve ID``, ``/reject ID reason``: answer a pending approval; an approval only of a call shown here."""
        try:
            command = AnswerCommand.parse(text)
        except ValueError as error:
            self.console.print(Text(str(error), style="red"))
            return
        assert command is not None, "only /approve and /reject come here"
        asking = self._asking
        interrupt_id = command.interrupt_id
        digest = self.shown.get(interrupt_id) or self.follower.renderer.shown_approvals.get(interrupt_id)
        if command.approved and digest is None:
            self.console.print(Text(f"{interrupt_id} was not shown here, so it is not approved: /snapshot shows it"))
            return
        accepted = await self.sessions.resolve_interrupt(
            self.session_id,
            interrupt_id,
            approved=command.approved,
            rejection_message=None if command.approved else command.reason,
            approver=self.follower.answered_by,
            call_digest=digest if command.approved else None,
        )
        if not accepted:
            snapshot = await self.follower.snapshot()
            pending = ", ".join(i.interrupt_id for i in snapshot.pending_interrupts) or "none"
            self.console.print(Text(f"{interrupt_id} is not pending (pending: {pending})", style="red"))
            return
        if asking is not None and asking.interrupt_id == interrupt_id:
            self.drop_question()  # answered: the prompt asks no more
        self.console.print(Text(f"sent: {'approved' if command.approved else 'rejected'} {interrupt_id}", style="dim"))
