"""The web console (``dex-agents console``, the ``console`` extra): watch sessions live and answer approvals.

A Starlette app served by uvicorn that reaches Dex only through
`dex_agents.infrastructure.dex.client.AgentSessionClient`. Pages are rendered
on the server (`dex_agents.console.html`, everything escaped); a small script
without a build step follows the live events over Server-Sent Events
(`dex_agents.console.live`) and resumes from the last event after a
reconnect. `dex_agents.console.security` keeps it loopback-only by default,
requires a token for any other bind, and refuses cross-site POSTs. Sessions
are listed from a durable `dex_agents.infrastructure.dex.session_index.SessionIndex`
(Dex 1.23 offers no listing this package can rely on).
"""
