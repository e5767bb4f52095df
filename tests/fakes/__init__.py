"""Test-only fakes: a Dex client over the in-memory host, and a failing event sink.

The in-memory ports, clock and session host are shipped in `dex_agents.testing.memory`.
"""
