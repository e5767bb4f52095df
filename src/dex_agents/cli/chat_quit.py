"""What ``/quit`` leaves behind in ``dex-agents chat``: it depends on where the session lives (`AfterQuit`)."""

from enum import StrEnum


class AfterQuit(StrEnum):
    """What becomes of the session when the person leaves with ``/quit``."""

    ENDS_WITH_CHAT = "ends_with_chat"
    """It lives on the dev server inside this process, in memory (``--in-memory``): it ends with the chat."""
    KEPT_FOR_NEXT_CHAT = "kept_for_next_chat"
    """It lives on the dev server inside this process, which keeps it in its data dir for the next chat."""
    WAITS_FOR_WORKER = "waits_for_worker"
    """It stays on the server; this process ran its Worker, so it continues once another Worker serves its Flow."""
    KEEPS_RUNNING = "keeps_running"
    """It stays on the server, served by the application's own Worker."""

    @classmethod
    def of(cls, *, embedded: bool, serve_worker: bool, kept: bool = False) -> "AfterQuit":
        """What follows ``/quit`` on an in-process dev server (``embedded``, ``kept`` on disk) or a server."""
        if embedded:
            return cls.KEPT_FOR_NEXT_CHAT if kept else cls.ENDS_WITH_CHAT
        return cls.WAITS_FOR_WORKER if serve_worker else cls.KEEPS_RUNNING

    def farewell(self, session_id: str) -> str:
        """Return what ``/quit`` prints."""
        match self:
            case AfterQuit.ENDS_WITH_CHAT:
                return (
                    f"left session {session_id}; it ends with this chat (its dev server runs in this process "
                    "in memory: leave out --in-memory to keep sessions)"
                )
            case AfterQuit.KEPT_FOR_NEXT_CHAT:
                return (
                    f"left session {session_id}; it is kept with this chat's data: chat --session {session_id} "
                    "picks it up again"
                )
            case AfterQuit.WAITS_FOR_WORKER:
                return (
                    f"left session {session_id}; it stays on the server and continues when a Worker serves its "
                    "Flow (this chat's Worker stops now)"
                )
            case AfterQuit.KEEPS_RUNNING:
                return f"left session {session_id}; it keeps running on the server"
