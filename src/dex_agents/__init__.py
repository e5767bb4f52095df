"""dex-agents: durable AI agent sessions on Dex."""
