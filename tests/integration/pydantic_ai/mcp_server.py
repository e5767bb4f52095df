"""A tiny stdio MCP server with annotated tools, for the adapter's MCP test."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} delivered"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
def set_status(order_id: str, status: str) -> str:
    """Set an order's status."""
    return f"order {order_id} -> {status}"


@server.tool()
def send(text: str) -> str:
    """Send a message."""
    return f"sent {text}"


if __name__ == "__main__":
    server.run("stdio")
