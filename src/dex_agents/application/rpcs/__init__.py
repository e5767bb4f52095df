"""One use case per RPC of the session Flow."""
