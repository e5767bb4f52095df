"""The demo order agent's plan, shared by its Pydantic AI and sagent versions (imports neither framework).

The scripted model looks the order up, refunds it, emails the customer, then
answers; a rejected or failed refund ends the plan early. `plan` decides the
next response from the turn's prompt and the tool results so far, by tool name.
"""

import os
import re
from collections.abc import Mapping

import attrs

from dex_agents.cli.shop import CHUNK_DELAY_ENV, ORDERS


@attrs.frozen(kw_only=True)
class ToolSeen:
    """What the model was told of one tool call."""

    ok: bool
    """Whether the call succeeded."""
    denied: bool
    """Whether its approval was refused."""
    text: str
    """What the model read."""


@attrs.frozen(kw_only=True)
class Reply:
    """The scripted model's next response."""

    text: str
    tool: str | None = None
    args: dict[str, str] = attrs.field(factory=dict)
    call_id: str = ""


def plan(prompt: str, results: Mapping[str, ToolSeen]) -> Reply:
    """Decide the scripted model's next response from the turn's prompt and the results so far."""
    match = re.search(r"order\s*#?\s*(\w+)", prompt, re.IGNORECASE)
    if match is None:
        return Reply(
            text="I am the demo's scripted model: I can look up and refund orders. "
            "Try: Refund order 7 and tell the customer."
        )
    order_id = match.group(1)
    wants_refund = "refund" in prompt.lower()
    found = results.get("find_order")
    if found is None:
        return Reply(
            text=f"Let me look up order {order_id}.", tool="find_order", args={"order_id": order_id}, call_id="call-1"
        )
    order = ORDERS.get(order_id)
    if order is None or not found.ok:
        return Reply(text=f"I could not find order {order_id}, so there is nothing I can do with it.")
    if not wants_refund:
        return Reply(text=f"Order {order_id} ({order.item}, {order.amount}) is {order.status}.")
    refund = results.get("refund_order")
    if refund is None:
        return Reply(
            text=f"Order {order_id} ({order.item}, {order.amount}) was {order.status}. "
            "Refunding it needs your approval.",
            tool="refund_order",
            args={"order_id": order_id},
            call_id="call-2",
        )
    if not refund.ok:
        why = "was not approved" if refund.denied else "failed"
        reason = refund.text.rstrip(".")
        return Reply(
            text=f"I did not refund order {order_id}: the refund {why} ({reason}). I have not emailed the customer."
        )
    refund_id = re.search(r"R-\d+", refund.text)
    email = results.get("email_customer")
    if email is None:
        return Reply(
            text=f"{refund.text}. Now I will tell the customer.",
            tool="email_customer",
            args={"order_id": order_id, "text": f"Your refund of {order.amount} for order {order_id} is on its way."},
            call_id="call-3",
        )
    told = "the customer has been emailed" if email.ok else "emailing the customer failed"
    receipt = f"{refund_id.group(0)}, {order.amount}" if refund_id else order.amount
    return Reply(text=f"Done: order {order_id} is refunded ({receipt}) and {told}.")


def chunk_delay() -> float:
    """Seconds between streamed words (``$DEX_AGENTS_DEMO_CHUNK_DELAY``, default 0.03)."""
    try:
        return float(os.environ.get(CHUNK_DELAY_ENV, "0.03"))
    except ValueError:
        return 0.03
