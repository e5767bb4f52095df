"""`AgentSessionClient`: start, talk to, watch and stop agent sessions from an application.

Everything goes through the Flow's RPCs and its live event Stream; the client
never touches state directly. Every input is checked before anything is sent
(`dex_agents.application.inputs`): a text over the Flow's
``max_input_text_bytes``, with a lone surrogate or NUL, or a malformed ID
raises `InvalidInputError` with the reason, and nothing reaches the session.
``resolve_interrupt`` retries a lock conflict (a Step holding
``PENDING_INTERRUPTS``) for up to 5 seconds. The query methods
load exactly the ``AGENT_MESSAGES`` instances they return.
"""

import asyncio
import time
from datetime import timedelta
from typing import Any, cast

import attrs
import dex

from dex_agents.application.inputs import id_refusal, text_refusal
from dex_agents.application.rpcs.resolve_interrupt import request_refusal
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import ResolveInterruptRequest
from dex_agents.domain.limits import InputProblem
from dex_agents.domain.messages import AgentUserMessage, message_sequence_key
from dex_agents.domain.snapshot import (
    AgentMessagesPage,
    AgentSnapshot,
    ListAgentMessagesRequest,
    MessageIndex,
    page_sequences,
    snapshot_sequences,
)
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.persistence import AGENT_MESSAGES

LOCK_CONFLICT_RETRY = timedelta(seconds=5)
"""How long `AgentSessionClient.resolve_interrupt` retries a lock conflict."""

_LOCK_CONFLICT_PAUSE = 0.05
_SNAPSHOT_TRIES = 5


@attrs.frozen(kw_only=True)
class AgentEventMessage:
    """One live event and the position to resume reading after it."""

    event: AgentEvent
    """The event."""
    resume_token: str
    """Pass to `AgentSessionClient.read_agent_event` to read the next one."""


class AgentSessionClient:
    """Drives the sessions of one `AgentSessionFlow` through a Dex `AsyncClient`."""

    def __init__(self, client: dex.AsyncClient, flow: AgentSessionFlow) -> None:
        self._client = client
        self._flow = flow

    @property
    def flow(self) -> AgentSessionFlow:
        """The sessions' Flow."""
        return self._flow

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        *,
        options: dex.StartFlowOptions | None = None,
    ) -> str:
        """Start a session (one Flow execution) and return its run ID.

        A blank or missing ``initial_message`` starts no turn: the session waits
        for `send_user_message`.

        Raises:
            InvalidInputError: the session ID or the first message is refused; no session was started.
            dex.FlowAlreadyStartedError: a session with this ID exists.
        """
        self._check_session_id(session_id)
        if initial_message is not None:
            _raise_if(
                text_refusal(
                    initial_message,
                    options=self._flow.options,
                    field="initial_message",
                    what="the first message",
                    allow_blank=True,
                )
            )
        start = AgentSessionStartInput(initial_message=initial_message)
        return await self._client.start_flow(self._flow, session_id, start, options or dex.StartFlowOptions())

    async def send_user_message(self, session_id: str, text: str) -> bool:
        """Queue a user message for the session's next turn; ``False`` for blank text, as the spec says.

        Raises:
            InvalidInputError: the text is refused (too large, a lone surrogate, NUL) or the session ID is
                malformed; nothing was sent.
            dex.FlowNotFoundError: no session has this ID.
        """
        self._check_session_id(session_id)
        refused = text_refusal(text, options=self._flow.options, field="text", what="the user message")
        if refused is not None and refused.problem is InputProblem.BLANK:
            return False
        _raise_if(refused)
        result = await self._client.invoke_rpc(
            cast(Any, self._flow.send_user_message), session_id, AgentUserMessage(text=text)
        )
        return bool(result)

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Answer a pending approval; ``False`` when it is not pending or its deadline passed.

        A lock conflict with a running Step is retried for 5 seconds, then raised.

        Raises:
            InvalidInputError: the interrupt ID or the rejection message is refused; nothing was sent.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        _raise_if(request_refusal(request, self._flow.options))
        give_up = time.monotonic() + LOCK_CONFLICT_RETRY.total_seconds()
        while True:
            try:
                result = await self._client.invoke_rpc(cast(Any, self._flow.resolve_interrupt), session_id, request)
            except dex.RpcLockConflictError:
                if time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(_LOCK_CONFLICT_PAUSE)
                continue
            return bool(result)

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's snapshot (works for a stopped session too).

        Reads the message index, then the snapshot with exactly its messages
        loaded (the latest 200 that fit in 2 MiB); if messages were added in
        between, reads again.
        """
        index = await self.get_message_index(session_id)
        snapshot = await self._snapshot(session_id, index)
        for _ in range(_SNAPSHOT_TRIES):
            latest = MessageIndex.of(snapshot.state)
            if latest.message_count == index.message_count:
                break
            index = latest
            snapshot = await self._snapshot(session_id, index)
        return snapshot

    async def _snapshot(self, session_id: str, index: MessageIndex) -> AgentSnapshot:
        sequences = snapshot_sequences(index.message_count, large_messages=index.large_messages)
        loads = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in sequences)
        snapshot = await self._client.invoke_rpc(
            cast(Any, self._flow.get_agent_snapshot),
            session_id,
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )
        return cast(AgentSnapshot, snapshot)

    async def get_message_count(self, session_id: str) -> int:
        """Return how many messages the session stored."""
        return int(await self._client.invoke_rpc(cast(Any, self._flow.get_agent_message_count), session_id))

    async def get_message_index(self, session_id: str) -> MessageIndex:
        """Return how many messages the session stored, and the sizes of its large ones."""
        index = await self._client.invoke_rpc(cast(Any, self._flow.get_agent_message_index), session_id)
        return cast(MessageIndex, index)

    async def list_agent_messages(
        self, session_id: str, *, after_sequence: int = 0, limit: int = 50
    ) -> AgentMessagesPage:
        """Return stored messages after ``after_sequence``, oldest first.

        ``limit`` is clamped to 1..200, and a page ends early rather than hold
        over 2 MiB of messages (it always holds at least one when there is one):
        follow ``next_after_sequence`` until it is ``None``.
        """
        index = await self.get_message_index(session_id)
        sequences, _ = page_sequences(
            after_sequence=after_sequence,
            limit=limit,
            message_count=index.message_count,
            large_messages=index.large_messages,
        )
        if not sequences:
            return AgentMessagesPage(messages=(), next_after_sequence=None)
        loads = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in sequences)
        page = await self._client.invoke_rpc(
            cast(Any, self._flow.list_agent_messages),
            session_id,
            ListAgentMessagesRequest(after_sequence=after_sequence, limit=len(sequences)),
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )
        return cast(AgentMessagesPage, page)

    async def read_agent_event(
        self, session_id: str, resume_token: str = "", *, long_poll: timedelta | None = None
    ) -> AgentEventMessage:
        """Wait for the next live event after ``resume_token`` ("" for the oldest retained).

        Raises:
            dex.LongPollTimeoutError: nothing arrived within ``long_poll`` (a server-side wait).
        """
        message = await self._client.read_stream(session_id, self._flow.events_stream, resume_token, long_poll)
        return AgentEventMessage(event=message.value, resume_token=message.resume_token)

    @staticmethod
    def _check_session_id(session_id: str) -> None:
        _raise_if(id_refusal(session_id, field="session_id", what="the session ID"))

    async def stop_session(self, session_id: str, reason: str | None = None) -> None:
        """Stop the session; its state stays readable through the query methods."""
        await self._client.stop_flow(session_id, dex.StopFlowOptions(type=dex.StopType.CANCEL, reason=reason))


def _raise_if(refused: InvalidInputError | None) -> None:
    if refused is not None:
        raise refused
