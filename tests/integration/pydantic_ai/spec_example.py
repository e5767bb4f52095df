"""The example program of the spec's README (``dex-agents-pydantic-ai.md``), run by ``test_spec_example``.

It is the spec's program unchanged except for the lines marked ``changed``:
the model is a `FunctionModel` (``order_model``, defined above the program);
the import of the adapter names its package in this repository
(``dex_agents.adapters.pydantic_ai`` for ``dex_agents_pydantic_ai``); the
Registry gets the dex-agents codecs; the server address comes from the command
line (a dev server); dex-python-sdk 1.23 (the pin here, not the spec's 1.30)
needs ``PullWorkerOptions`` on the Worker and ``WorkerTarget(pull=True)`` on
the Client for pull mode; and ``asyncio.run(main())`` runs under
``if __name__ == "__main__"``. Run: ``python -m tests.integration.pydantic_ai.spec_example HOST:PORT``.
"""

import sys
from collections.abc import AsyncIterator

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from dex_agents import codec_registry


def _order_response(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Find the order, refund it, email the customer, then answer (what a real model would do)."""
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    done = {r.tool_name: r.model_response_str() for r in returns}
    if "find_order" not in done:
        return ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "7"}, tool_call_id="find-1")])
    if "refund_order" not in done:
        return ModelResponse(parts=[ToolCallPart("refund_order", {"order_id": "7"}, tool_call_id="refund-1")])
    if "email_customer" not in done:
        text = f"Your order 7 is refunded ({done['refund_order']})."
        args = {"order_id": "7", "text": text}
        return ModelResponse(parts=[ToolCallPart("email_customer", args, tool_call_id="email-1")])
    return ModelResponse(parts=[TextPart(f"Done: {done['refund_order']}; {done['email_customer']}.")])


async def _order_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    for index, part in enumerate(_order_response(messages, info).parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


order_model = FunctionModel(_order_response, stream_function=_order_stream)
SERVER_ADDRESS = sys.argv[1] if len(sys.argv) > 1 else "localhost:8801"

# --- the spec's example program ---
import asyncio  # noqa: E402

from dex import (  # noqa: E402  # noqa: E402  # noqa: E402  # changed: SDK 1.23 pull mode (dex-sdk primer G4)
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    PullWorkerOptions,
    Registry,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from pydantic_ai import Agent, RunContext  # noqa: E402

from dex_agents import AgentSessionClient, ToolEffect, ToolPolicy  # noqa: E402
from dex_agents.adapters.pydantic_ai import (  # noqa: E402  # changed: the package's import path here
    deferred_tool_idempotency_key,
    pydantic_ai_session_flow,
)

ORDERS = {"7": "delivered"}
REFUNDS: dict[str, str] = {}

agent = Agent(order_model, instructions="You help customers with their orders.")  # changed: the model


@agent.tool_plain
def find_order(order_id: str) -> str:
    """Return the status of an order."""
    return ORDERS.get(order_id, "unknown order")


@agent.tool  # type: ignore[arg-type]  # mypy infers Agent[object, str] for Agent(model); pyright infers None
def refund_order(ctx: RunContext[None], order_id: str) -> str:
    """Refund an order."""
    key = deferred_tool_idempotency_key(ctx) or order_id
    REFUNDS.setdefault(key, f"refund-{len(REFUNDS) + 1}")
    return f"{REFUNDS[key]} issued for order {order_id}"


@agent.tool_plain
def email_customer(order_id: str, text: str) -> str:
    """Email the customer who placed an order."""
    return f"emailed the customer of order {order_id}"


flow = pydantic_ai_session_flow(
    agent,
    flow_type="OrderAgent",
    tool_policies={
        "find_order": ToolPolicy(ToolEffect.READ),
        "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
        "email_customer": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
    },
)


async def main() -> None:
    registry = Registry([flow], codec_registry(), allow_async_handlers=True)  # changed: the codec line
    cache = open_blob_cache(BlobCacheConfig(".dex-cache", 64 * 1024 * 1024))
    # changed: the address, and SDK 1.23's pull mode on both sides (dex-sdk primer G4)
    worker = AsyncWorker(registry, cache, WorkerOptions(server_address=SERVER_ADDRESS, pull=PullWorkerOptions()))
    client = AsyncClient(
        registry, cache, ClientOptions(server_address=SERVER_ADDRESS, worker_target=WorkerTarget(pull=True))
    )
    serving = asyncio.create_task(worker.start())
    try:
        await worker.wait_pull_registered(timeout=30)
        sessions = AgentSessionClient(client, flow)
        await sessions.start_session("order-session-7", "Refund order 7 and tell the customer.")
        while True:
            snapshot = await sessions.get_agent_snapshot("order-session-7")
            state = snapshot.state
            if state is not None and state.turn_count >= 1 and state.active_turn_id is None:
                break
            for interrupt in snapshot.pending_interrupts:
                print(f"approving {interrupt.tool_name} {interrupt.arguments}")  # noqa: T201
                await sessions.resolve_interrupt("order-session-7", interrupt.interrupt_id, approved=True)
            await asyncio.sleep(0.5)
        print(snapshot.messages[-1].text)  # noqa: T201
    finally:
        await worker.stop()
        await serving
        await client.close()
        cache.close()


if __name__ == "__main__":  # changed: importing the module does not run it
    asyncio.run(main())
