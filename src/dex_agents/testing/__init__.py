"""Test doubles and engines for dex-agents and for adapter authors (importable without pytest)."""
