"""Application layer: ports, the runner contract and one use case per Step and RPC."""
