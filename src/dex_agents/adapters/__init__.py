"""Framework adapters: each implements the runner contract."""
