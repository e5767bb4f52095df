"""Chat front-ends on agent sessions: `vercel_ai_app`, a session as a Vercel AI SDK chat backend (the ``[ui]`` extra).

The app reads and drives sessions only through an `AgentSessionClient`, and
builds every stream from the session's durable event stream, so a page that
reloads or loses its connection resumes the running turn without losing or
repeating a part. It reuses Pydantic AI's encoders of the AI SDK's UI message
stream (``pydantic_ai.ui.vercel_ai``); ``import dex_agents`` does not import
this package.
"""

from dex_agents.ui.vercel_ai import vercel_ai_app

__all__ = ["vercel_ai_app"]
