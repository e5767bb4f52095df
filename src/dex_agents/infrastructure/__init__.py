"""Bindings of the application to engines."""
