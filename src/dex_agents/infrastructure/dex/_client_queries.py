"""The client's state queries: the snapshot (with the message index it keeps per session), counts and pages.

They load exactly the ``AGENT_MESSAGES`` instances they return.
"""

import collections

import dex

from dex_agents.domain.messages import message_sequence_key
from dex_agents.domain.snapshot import (
    AgentMessagesPage,
    AgentSnapshot,
    ListAgentMessagesRequest,
    MessageIndex,
    page_sequences,
    snapshot_sequences,
)
from dex_agents.infrastructure.dex._client_rpc import SessionRpc
from dex_agents.infrastructure.dex.persistence import AGENT_MESSAGES
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError

_SNAPSHOT_TRIES = 5
_KEPT_INDEXES = 1024
"""Sessions whose last message index a client keeps for its next snapshot (least recently read go first)."""


class SessionQueries(SessionRpc):
    """What a session's committed state says: its snapshot, its message count and index, pages of its messages."""

    _indexes: "collections.OrderedDict[str, MessageIndex]"

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's snapshot (works for a stopped session too).

        Reads the snapshot with exactly the messages of the session's message
        index loaded (the latest 200 that fit in 2 MiB); if the snapshot's own
        message count differs (messages were added in between), reads again with its index. The
        index is the one the last snapshot of this session showed, kept by this
        client (one RPC when nothing changed since), else read first with the
        ``get_agent_message_index`` RPC.
        """
        self._check_session_id(session_id)
        index = self._indexes.get(session_id)
        if index is None:
            index = await self.get_message_index(session_id)
        snapshot = await self._snapshot(session_id, index)
        for _ in range(_SNAPSHOT_TRIES):
            latest = MessageIndex.of(snapshot.state)
            if latest.message_count == index.message_count:
                break
            index = latest
            snapshot = await self._snapshot(session_id, index)
        self._indexes[session_id] = MessageIndex.of(snapshot.state)
        self._indexes.move_to_end(session_id)
        while len(self._indexes) > _KEPT_INDEXES:
            self._indexes.popitem(last=False)
        return snapshot

    async def _snapshot(self, session_id: str, index: MessageIndex) -> AgentSnapshot:
        sequences = snapshot_sequences(index.message_count, large_messages=index.large_messages)
        loads = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in sequences)
        return await self._query(
            self._flow.get_agent_snapshot,
            session_id,
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )

    async def get_message_count(self, session_id: str) -> int:
        """Return how many messages the session stored."""
        count: int = await self._query(self._flow.get_agent_message_count, session_id)
        return count

    async def get_message_index(self, session_id: str) -> MessageIndex:
        """Return how many messages the session stored, and the sizes of its large ones."""
        return await self._query(self._flow.get_agent_message_index, session_id)

    async def list_agent_messages(
        self, session_id: str, *, after_sequence: int = 0, limit: int = 50
    ) -> AgentMessagesPage:
        """Return stored messages after ``after_sequence``, oldest first.

        ``limit`` is clamped to 1..200, and a page ends early rather than hold
        over 2 MiB of messages (it always holds at least one when there is one):
        follow ``next_after_sequence`` until it is ``None``.
        """
        self._check_session_id(session_id)
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
        return await self._call(
            self._flow.list_agent_messages,
            session_id,
            ListAgentMessagesRequest(after_sequence=after_sequence, limit=len(sequences)),
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )
