"""Connecting to Dex: `dex_agents.launch.engine`, which the web console shares."""

from dex_agents.launch.engine import WORKER_REGISTRATION_TIMEOUT, Engine, open_engine, parse_server, start_devserver

__all__ = ["WORKER_REGISTRATION_TIMEOUT", "Engine", "open_engine", "parse_server", "start_devserver"]
