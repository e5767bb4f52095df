"""The web console (``dex-agents console``, the ``console`` extra): watch sessions live, answer approvals, steer.

A Starlette app served by uvicorn that reaches Dex only through
`dex_agents.infrastructure.dex.client.AgentSessionClient`. Pages are rendered
on the server (`dex_agents.console.html`, everything escaped); a small script
without a build step follows the live events over Server-Sent Events
(`dex_agents.console.live`) and resumes from the last event after a
reconnect. On a session's page a person sends a message queued for the next
turn or steering the running one, cancels the running turn (with a reason),
and withdraws messages that still wait. `dex_agents.console.security` keeps it loopback-only by default,
requires a token for any other bind, and refuses cross-site POSTs. Sessions
are listed from a durable `dex_agents.infrastructure.dex.session_index.SessionIndex`
(Dex 1.23 offers no listing this package can rely on).
"""
