"""Pure domain of dex-agents: values, transitions and policies (stdlib and attrs only)."""
