"""Finding the Flow a command serves or drives: `dex_agents.launch.loading`, which the web console shares."""

from dex_agents.launch.loading import EXAMPLE_TARGET, MODEL_FLOW_TYPE, LoadedFlow, load_flow

__all__ = ["EXAMPLE_TARGET", "MODEL_FLOW_TYPE", "LoadedFlow", "load_flow"]
