"""The Pydantic AI runner."""
