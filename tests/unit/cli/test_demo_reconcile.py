"""The demo's ``email_customer`` reconcile probe looks in the outbox for the call's idempotency key."""

from pathlib import Path

import pytest

from dex_agents import ReconcileResult
from dex_agents.adapters.pydantic_ai import ReconcileCall
from dex_agents.adapters.pydantic_ai.reconcile import find_reconcile_probe
from dex_agents.cli.order_agent import build_order_agent, email_sent
from dex_agents.cli.shop import STATE_ENV, send_email


def probe_call(key: str) -> ReconcileCall:
    return ReconcileCall(
        session_id="s", tool_name="email_customer", arguments={"order_id": "7"}, idempotency_key=key, deps=None
    )


async def test_the_probe_finds_the_email_sent_under_the_calls_key_and_nothing_under_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_ENV, str(tmp_path))
    send_email("ada@example.com", "refunded", key="s/turn-1/email-1")
    send_email("bob@example.com", "no key")

    assert await email_sent(probe_call("s/turn-1/email-1")) == ReconcileResult.applied("emailed ada@example.com")
    assert await email_sent(probe_call("s/turn-1/email-2")) == ReconcileResult.not_applied()


def test_email_customer_declares_the_probe_in_its_metadata() -> None:
    agent = build_order_agent()

    assert find_reconcile_probe(agent, "email_customer") is email_sent
    assert find_reconcile_probe(agent, "refund_order") is None
