"""What a probe reports (`Finding`, `Verdict`) and what every probe works with (its Client, its Flow, its IDs)."""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

import dex

from dex_agents.domain.shown_text import visible
from dex_agents.testing.conformance._flows import ProbeFlow

PROBE_TIME_LIMIT = 90.0
"""Seconds one probe may take before it counts as not checked."""


class Verdict(StrEnum):
    """What a probe found."""

    HOLDS = "holds"
    DIFFERS = "differs"
    UNCHECKED = "could not be checked"


@dataclass(frozen=True)
class Finding:
    """One assumption and what the server did.

    Attributes:
        assumption: The rule dex-agents relies on, in a few words.
        verdict: Holds, differs or could not be checked.
        seen: What was seen (for ``differs`` and ``could not be checked``).
    """

    assumption: str
    verdict: Verdict
    seen: str = ""


def format_finding(finding: Finding) -> str:
    """One output line: ``<verdict>: <assumption>[ — <seen>]``, its control characters shown visibly.

    What a finding saw quotes the server (an error's message, a value read back):
    printed as it came, a terminal would run its escape sequences (`visible`).
    """
    tail = f" — {finding.seen}" if finding.seen and finding.verdict is not Verdict.HOLDS else ""
    return visible(f"{finding.verdict.value}: {finding.assumption}{tail}")


def exit_code(findings: Sequence[Finding]) -> int:
    """1 when any assumption differs, else 0 (not checked is not a failure)."""
    return 1 if any(f.verdict is Verdict.DIFFERS for f in findings) else 0


@dataclass(frozen=True)
class _Env:
    client: dex.AsyncClient
    flow: ProbeFlow
    address: str
    prefix: str

    def flow_id(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    async def start(self, name: str, step: str) -> str:
        """Start a probe Flow at ``step`` under the ID of ``name``; return that ID."""
        flow_id = self.flow_id(name)
        await self.client.start_flow(self.flow, flow_id, step)
        return flow_id


def _holds(assumption: str) -> Finding:
    return Finding(assumption, Verdict.HOLDS)


def _differs(assumption: str, seen: str) -> Finding:
    return Finding(assumption, Verdict.DIFFERS, seen)


async def _output(env: _Env, flow_id: str, within: float = 60.0) -> str:
    result = await env.client.wait_for_flow(flow_id, timeout=timedelta(seconds=within))
    if result.status is not dex.FlowStatus.COMPLETED:
        raise RuntimeError(f"probe Flow {flow_id} ended {result.status.name}")
    return str(result.single_output(str))


async def _wait_event(flag: asyncio.Event, within: float, what: str) -> None:
    try:
        await asyncio.wait_for(flag.wait(), within)
    except TimeoutError:
        raise RuntimeError(f"{what} did not happen within {within:g} s") from None
