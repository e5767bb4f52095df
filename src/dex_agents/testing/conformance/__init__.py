"""The conformance probe: checks, on any Dex server, the server rules dex-agents' guarantees rest on.

``python -m dex_agents.testing.conformance --server HOST:PORT`` (or ``dex-agents
conformance --server HOST:PORT``) runs one small probe Flow per assumption, with its
own pull Worker (and a child Worker it SIGKILLs for the redelivery probes), and
prints one line per assumption: ``holds``, ``differs: <what was seen>`` or
``could not be checked: <why>``. The exit code is 1 when any assumption differs,
else 0. Run it first against a real ``dexcli dev`` before trusting the dev server; it
runs against the dev server in ``make check``.
"""

from dex_agents.testing.conformance._findings import Finding, Verdict, exit_code, format_finding
from dex_agents.testing.conformance._probe import main, run_conformance, run_probes

__all__ = ["Finding", "Verdict", "exit_code", "format_finding", "main", "run_conformance", "run_probes"]
