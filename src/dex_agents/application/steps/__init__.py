"""One use case per Step of the session Flow."""
