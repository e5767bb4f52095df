"""Side-by-side benchmark: dex-agents vs Pydantic AI plain, on DBOS and on Temporal (issue 7).

Run ``make bench-peers`` (it builds ``.bench-venv`` with the peers installed), or
``.bench-venv/bin/python -m benchmarks.peers.bench --help``. How to read the tables:
``docs/benchmarks.md``. This package must stay import-safe inside Temporal's workflow
sandbox: no I/O at import time.
"""
