"""What the command line (`dex_agents.cli`) and the web console (`dex_agents.console`) share, below both.

Both front ends start an engine, load the Flow they serve, fail with one line
and print nothing a terminal would run; that lives here, so neither imports
the other to do it (the command line's ``console`` command is the one way
from `dex_agents.cli` to `dex_agents.console`).

Layout: `engine` (the dev server or a server, Client, in-process Worker),
`loading` (``MODULE:FLOW_FACTORY`` or a model name), `errors` (`CliError`,
exit codes, `explain`), `output` (the sanitiser everything printed passes) and
`demo` (the demo's Flow and first message).
"""
