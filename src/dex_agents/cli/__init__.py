"""The ``dex-agents`` command line.

Commands:

- ``demo [--yes | --no] [--crash]``: the order agent (find an order, refund
  it after an approval, email the customer) with a scripted model on the dev server
  started in this process, its Worker in a child process; ``--crash`` kills
  that Worker in the middle of the refund Step and starts a replacement.
- ``chat MODULE:FLOW_FACTORY [--server HOST:PORT]``: an interactive session
  with streamed output, inline approvals, ``/snapshot``, ``/history``,
  ``/stop``.
- ``watch SESSION_ID --server HOST:PORT --flow MODULE:FLOW_FACTORY``: follow a
  running session from a position (``--from TOKEN``) and answer its approvals
  (``approve ID`` / ``reject ID "reason"``); ``approve SESSION_ID ID`` and
  ``reject SESSION_ID ID [REASON]`` give one answer from the shell.
- ``dev-server [--port N]``: the dev server on 127.0.0.1 until Ctrl-C.

Layout: `app` (the click commands), `running` (how a command runs and fails),
`follow` (reading and answering a session's events), `render` and `transcript`
(drawing them with rich, text grouped by ``(turn_id, step_execution_id,
attempt)``), `terminal` (prompts without blocking the event loop), and one
module per command: `demo` (with `order_agent`, its `shop`, `demo_worker` and
`demo_supervisor`), `chat`, `watch` (also ``approve`` / ``reject``),
`dev_server`. What the web console shares (engine start-up,
``MODULE:FLOW_FACTORY`` loading, errors and exit codes, the output sanitiser) is
in `dex_agents.launch`; `engine`, `loading`, `errors` and `output` here name the
same things.
"""

from dex_agents.cli.app import cli, main

__all__ = ["cli", "main"]
