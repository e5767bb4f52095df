"""The demo shop: orders, a refund ledger, an outbox and a log of tool runs, in files.

The order agent's tools run in a Worker process and the demo reads what they
did from another, so the shop lives in files under one directory
(``$DEX_AGENTS_DEMO_STATE``, else a temporary directory per process). The
refund ledger is keyed by the call's idempotency key: a retried refund finds
the entry its first attempt booked. The order agent's tools are written here
once (`find_order`, `refund_order`, `email_customer`) and wrapped by each
framework's agent. This module does not import Pydantic AI, so the demo can
start its Worker before it loads the agent.
"""

import atexit
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from dex_agents.testing.probes import FileGate, InvocationLog

STATE_ENV = "DEX_AGENTS_DEMO_STATE"
"""The directory of the shop's files (ledger, outbox, invocation log, gates)."""

CRASH_ENV = "DEX_AGENTS_DEMO_CRASH"
"""When set, the first ``refund_order`` run waits at the ``refund`` gate after the refund is booked."""

CHUNK_DELAY_ENV = "DEX_AGENTS_DEMO_CHUNK_DELAY"
"""Seconds between streamed words (default 0.03)."""

FRAMEWORK_ENV = "DEX_AGENTS_DEMO_FRAMEWORK"
"""Which order agent the demo's Worker serves: ``pydantic-ai`` (default) or ``sagent``."""

PYDANTIC_AI = "pydantic-ai"
SAGENT = "sagent"
FRAMEWORKS = (PYDANTIC_AI, SAGENT)
"""The frameworks ``dex-agents demo --framework`` runs the order agent on."""

REFUND_GATE = "refund"
"""The gate ``refund_order`` waits at in crash mode."""


@attrs.frozen(kw_only=True)
class Order:
    """An order of the demo shop."""

    order_id: str
    item: str
    amount: str
    status: str
    customer: str

    def describe(self) -> str:
        """One line for the model."""
        return f"order {self.order_id}: {self.item}, {self.amount}, {self.status}, customer {self.customer}"


ORDERS = {
    "7": Order(
        order_id="7", item="trail running shoes", amount="42.00 EUR", status="delivered", customer="ada@example.com"
    ),
    "8": Order(order_id="8", item="a rain jacket", amount="89.00 EUR", status="shipped", customer="grace@example.com"),
}
"""The shop's orders."""

_default_state: Path | None = None


def state_dir() -> Path:
    """Return the shop's directory: ``$DEX_AGENTS_DEMO_STATE``, else a temporary one per process (removed at exit)."""
    global _default_state
    configured = os.environ.get(STATE_ENV)
    if configured:
        path = Path(configured)
    else:
        if _default_state is None:
            _default_state = Path(tempfile.mkdtemp(prefix="dex-agents-orders-"))
            atexit.register(shutil.rmtree, _default_state, ignore_errors=True)
        path = _default_state
    path.mkdir(parents=True, exist_ok=True)
    return path


def invocations(directory: Path | None = None) -> InvocationLog:
    """Return the log of every tool run (across Worker processes)."""
    return InvocationLog((directory or state_dir()) / "invocations.jsonl")


def refund_gate(directory: Path | None = None) -> FileGate:
    """Return the gate ``refund_order`` waits at in crash mode."""
    return FileGate((directory or state_dir()) / "gates", REFUND_GATE)


@attrs.frozen(kw_only=True)
class Refund:
    """One entry of the refund ledger."""

    refund_id: str
    order_id: str
    amount: str
    key: str


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / (path.name + ".lock")).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _ledger_path(directory: Path) -> Path:
    return directory / "refunds.jsonl"


def read_refunds(directory: Path | None = None) -> list[Refund]:
    """Return every refund in the ledger, oldest first."""
    path = _ledger_path(directory or state_dir())
    if not path.exists():
        return []
    return [Refund(**json.loads(line)) for line in path.read_text().splitlines() if line]


def issue_refund(order: Order, key: str, directory: Path | None = None) -> tuple[Refund, bool]:
    """Book a refund once per idempotency key; return it and whether it was booked before."""
    directory = directory or state_dir()
    path = _ledger_path(directory)
    with _locked(path):
        refunds = read_refunds(directory)
        for refund in refunds:
            if refund.key == key:
                return refund, True
        refund = Refund(refund_id=f"R-{len(refunds) + 1}", order_id=order.order_id, amount=order.amount, key=key)
        with path.open("a") as ledger:
            ledger.write(json.dumps(attrs.asdict(refund)) + "\n")
        return refund, False


def read_outbox(directory: Path | None = None) -> list[dict[str, str]]:
    """Return every email sent, oldest first."""
    path = (directory or state_dir()) / "outbox.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def send_email(to: str, text: str, directory: Path | None = None, *, key: str | None = None) -> None:
    """Put one email in the outbox, under the sending call's idempotency ``key`` when given."""
    path = (directory or state_dir()) / "outbox.jsonl"
    entry = {"to": to, "text": text} if key is None else {"to": to, "text": text, "key": key}
    with _locked(path), path.open("a") as outbox:
        outbox.write(json.dumps(entry) + "\n")


def find_email(key: str, directory: Path | None = None) -> dict[str, str] | None:
    """Return the email the call with idempotency ``key`` put in the outbox, or ``None``."""
    return next((mail for mail in read_outbox(directory) if mail.get("key") == key), None)


def tool_runs(name: str, directory: Path | None = None) -> list[dict[str, Any]]:
    """Return every logged run of tool ``name``, oldest first (each with the ``pid`` that ran it)."""
    return [entry for entry in invocations(directory).entries() if entry["kind"] == "tool" and entry["name"] == name]


def find_order(order_id: str) -> str:
    """The ``find_order`` tool: the status of an order."""
    invocations().record("tool", "find_order", order_id=order_id)
    order = ORDERS.get(order_id)
    return order.describe() if order is not None else f"unknown order {order_id}"


async def refund_order(order_id: str, *, key: str | None) -> str:
    """The ``refund_order`` tool: refund an order once per idempotency ``key`` (default: one per order).

    In crash mode (``$DEX_AGENTS_DEMO_CRASH``) the first run parks at the refund gate once the refund is booked.
    """
    key = key or f"order-{order_id}"
    invocations().record("tool", "refund_order", key=key)
    order = ORDERS.get(order_id)
    if order is None:
        return f"unknown order {order_id}"
    refund, again = issue_refund(order, key)
    gate = refund_gate()
    if os.environ.get(CRASH_ENV) and not gate.is_reached():
        # The refund is booked; the Worker is killed here, before the Step can report it.
        await gate.wait_for_release(timeout=60)
    booked = " (booked before under the same key)" if again else ""
    return f"Refund {refund.refund_id} of {refund.amount} issued for order {order_id}{booked}"


def email_customer(order_id: str, text: str, *, key: str | None) -> str:
    """The ``email_customer`` tool: email the customer who placed an order, under the call's idempotency ``key``."""
    invocations().record("tool", "email_customer", order_id=order_id)
    order = ORDERS.get(order_id)
    if order is None:
        return f"unknown order {order_id}"
    send_email(order.customer, text, key=key)
    return f"emailed {order.customer}"
