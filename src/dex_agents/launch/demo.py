"""The demo as both front ends start it: the order agent's Flow and its first user message."""

DEMO_FLOW = "dex_agents.cli.order_agent:build_order_flow"
"""The demo's ``MODULE:FLOW_FACTORY`` (`dex_agents.launch.loading.load_flow` imports it when it runs)."""

DEMO_PROMPT = "Refund order 7 and tell the customer."
"""The demo's first user message."""
