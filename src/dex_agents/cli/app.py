"""The ``dex-agents`` commands (click); how each one runs and fails is `dex_agents.cli.running`."""

import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from dex_agents.cli.data import data_options
from dex_agents.cli.running import (
    approver_option,
    debug_option,
    flow_option,
    make_console,
    run,
    server_option,
    wants_debug,
)
from dex_agents.launch.errors import EXIT_INTERRUPTED, EXIT_OK, UsageError
from dex_agents.launch.output import SafeConsole, VisibleWriter

__all__ = ["TOKEN_FLAG_REFUSED", "cli", "main", "make_console", "run"]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Durable AI agent sessions on Dex: a demo, a chat, a watch with approvals, a web console, a dev server.",
)
@click.option("--debug", is_flag=True, default=False, help="Print the traceback of a failure.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """The command group."""
    ctx.obj = {"debug": debug}


@cli.command()
@click.option("--yes", "approve_refund", is_flag=True, default=False, help="Approve the refund without asking.")
@click.option("--no", "reject_refund", is_flag=True, default=False, help="Reject the refund without asking.")
@click.option("--crash", is_flag=True, default=False, help="SIGKILL the Worker in the middle of the refund Step.")
@click.option(
    "--crash-engine",
    is_flag=True,
    default=False,
    help="SIGKILL the dev server in the middle of the refund Step and start it again on its data dir.",
)
@click.option(
    "--framework",
    type=click.Choice(["pydantic-ai", "sagent"]),
    default="pydantic-ai",
    show_default=True,
    help="The framework the order agent runs on (sagent needs Python 3.13+ and dex-agents[sagent]).",
)
@debug_option
@click.pass_context
def demo(
    ctx: click.Context,
    approve_refund: bool,
    reject_refund: bool,
    crash: bool,
    crash_engine: bool,
    framework: str,
    debug: bool,
) -> int:
    """Run the order agent (find, refund with approval, email) on the dev server with a scripted model.

    Asks "Approve refund_order ...? [y/N]" when standard input is a terminal;
    otherwise answers no, unless --yes or --no says.
    """
    if approve_refund and reject_refund:
        raise click.UsageError("--yes and --no exclude each other", ctx)
    if crash and crash_engine:
        raise click.UsageError("--crash and --crash-engine exclude each other (one crash a demo)", ctx)
    from dex_agents.cli.demo import run_demo

    answer = True if approve_refund else (False if reject_refund else None)
    return run(
        lambda console: run_demo(console, answer=answer, crash=crash, framework=framework, crash_engine=crash_engine),
        debug=wants_debug(ctx, debug=debug),
    )


@cli.command()
@click.argument("target", metavar="MODULE:FLOW_FACTORY")
@click.option(
    "--server", metavar="HOST:PORT", default=None, help="Dex to use (default: the dev server in this process)."
)
@click.option("--session", "session_id", metavar="ID", default=None, help="Session to start or join (default: new).")
@click.option(
    "--worker/--no-worker",
    default=True,
    help="Serve the Flow with a Worker in this process (default); --no-worker when your app's Worker serves it.",
)
@approver_option
@data_options
@debug_option
@click.pass_context
def chat(
    ctx: click.Context,
    target: str,
    server: str | None,
    session_id: str | None,
    worker: bool,
    approver: str | None,
    data: str | None,
    in_memory: bool,
    debug: bool,
) -> int:
    """Talk to an agent session: streamed answers, approvals asked inline, /snapshot, /history, /stop.

    MODULE:FLOW_FACTORY names a function returning an AgentSessionFlow (for
    example dex_agents.cli.order_agent:build_order_flow); a Pydantic AI model
    name such as openai:gpt-5.2 works too when its provider package and API key
    are present.

    Without --server, its dev server runs in this process and keeps the sessions in
    $XDG_STATE_HOME/dex-agents/chat/ (or --data DIR; --in-memory keeps nothing), so
    chat --session ID later goes on with a conversation.
    """
    from dex_agents.cli.chat import run_chat
    from dex_agents.cli.data import choose_data_dir, embedded_dir

    def command(console: Console) -> Coroutine[Any, Any, None]:
        if server is not None and (data is not None or in_memory):
            raise UsageError("--data and --in-memory are for the dev server chat runs itself: leave out --server")
        data_dir = choose_data_dir(data, embedded_dir("chat"), in_memory=in_memory)
        return run_chat(
            console,
            target,
            server=server,
            session_id=session_id,
            serve_worker=worker,
            approver=approver,
            data_dir=data_dir,
        )

    return run(command, debug=wants_debug(ctx, debug=debug))


@cli.command()
@click.argument("session_id")
@server_option
@flow_option
@click.option("--from", "resume_token", metavar="TOKEN", default="", help="Resume token (default: the oldest event).")
@click.option("--until-idle", is_flag=True, default=False, help="Exit once no turn runs and no approval waits.")
@approver_option
@debug_option
@click.pass_context
def watch(
    ctx: click.Context,
    session_id: str,
    server: str,
    flow_target: str,
    resume_token: str,
    until_idle: bool,
    approver: str | None,
    debug: bool,
) -> int:
    """Follow a running session's events and answer its approvals.

    Type approve ID, reject ID "reason", snapshot or quit while it runs. An
    approval binds to the call as watch printed it, and names --approver.
    """
    from dex_agents.cli.watch import run_watch

    return run(
        lambda console: run_watch(
            console,
            session_id,
            server=server,
            flow_target=flow_target,
            resume_token=resume_token,
            until_idle=until_idle,
            approver=approver,
        ),
        debug=wants_debug(ctx, debug=debug),
    )


@cli.command()
@click.argument("session_id")
@click.argument("interrupt_id")
@server_option
@flow_option
@approver_option
@click.option(
    "--call-digest",
    metavar="DIGEST",
    default=None,
    help="Approve only the call of this digest (the call_digest you were shown); default: the call as printed.",
)
@debug_option
@click.pass_context
def approve(
    ctx: click.Context,
    session_id: str,
    interrupt_id: str,
    server: str,
    flow_target: str,
    approver: str | None,
    call_digest: str | None,
    debug: bool,
) -> int:
    """Approve one pending tool call of a session (printed first); a call that differs is failed, not run."""
    from dex_agents.cli.watch import run_answer

    return run(
        lambda console: run_answer(
            console,
            session_id,
            interrupt_id,
            server=server,
            flow_target=flow_target,
            approved=True,
            reason=None,
            approver=approver,
            call_digest=call_digest,
        ),
        debug=wants_debug(ctx, debug=debug),
    )


@cli.command()
@click.argument("session_id")
@click.argument("interrupt_id")
@click.argument("reason", required=False)
@server_option
@flow_option
@approver_option
@debug_option
@click.pass_context
def reject(
    ctx: click.Context,
    session_id: str,
    interrupt_id: str,
    reason: str | None,
    server: str,
    flow_target: str,
    approver: str | None,
    debug: bool,
) -> int:
    """Reject one pending tool call of a session, with an optional reason the model sees."""
    from dex_agents.cli.watch import run_answer

    return run(
        lambda console: run_answer(
            console,
            session_id,
            interrupt_id,
            server=server,
            flow_target=flow_target,
            approved=False,
            reason=reason,
            approver=approver,
        ),
        debug=wants_debug(ctx, debug=debug),
    )


@cli.command("dev-server")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8801, show_default=True, help="Port on 127.0.0.1 (0: any)."
)
@data_options
@debug_option
@click.pass_context
def dev_server(ctx: click.Context, port: int, data: str | None, in_memory: bool, debug: bool) -> int:
    """Serve the dev server on 127.0.0.1 until Ctrl-C (for people without dexcli).

    It keeps every session in its data dir (default: $XDG_STATE_HOME/dex-agents/dev/PORT/,
    printed at start), so a dev server started again on it goes on with them; --in-memory
    keeps nothing. Delete the dir to throw its sessions away.
    """
    from dex_agents.cli.data import choose_data_dir, dev_server_dir
    from dex_agents.cli.dev_server import run_dev_server

    def command(console: Console) -> Coroutine[Any, Any, None]:
        return run_dev_server(console, port, data_dir=choose_data_dir(data, dev_server_dir(port), in_memory=in_memory))

    return run(command, debug=wants_debug(ctx, debug=debug))


TOKEN_FLAG_REFUSED = (
    "--token is deprecated and no longer accepted: a command line shows in `ps` to every user of this machine. "
    "Put the token in $DEX_AGENTS_CONSOLE_TOKEN or in a file only you can read, and pass --token-file FILE"
)
"""What ``console --token`` says."""


@cli.command()
@click.option("--server", metavar="HOST:PORT", default=None, help="The Dex server (not with --demo).")
@click.option("--flow", "flow_target", metavar="MODULE:FLOW_FACTORY", default=None, help="The sessions' Flow.")
@click.option("--demo", is_flag=True, default=False, help="The dev server and the demo's order agent in this process.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: a token).")
@click.option("--port", type=click.IntRange(0, 65535), default=8810, show_default=True, help="Port (0: any).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File holding the token every request must carry (default: $DEX_AGENTS_CONSOLE_TOKEN); 32+ bytes beyond "
    "loopback.",
)
@click.option("--token", default=None, hidden=True, help="Deprecated (shows in ps): use --token-file.")
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Serve HTTPS with this PEM certificate.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Its PEM private key (with --tls-cert).",
)
@click.option("--index", "index_path", type=click.Path(dir_okay=False), default=None, help="The session index file.")
@click.option("--worker/--no-worker", default=False, help="Also serve the Flow with a Worker here (default: no).")
@data_options
@debug_option
@click.pass_context
def console(
    ctx: click.Context,
    server: str | None,
    flow_target: str | None,
    demo: bool,
    host: str,
    port: int,
    token_file: Path | None,
    token: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    index_path: str | None,
    worker: bool,
    data: str | None,
    in_memory: bool,
    debug: bool,
) -> int:
    """Serve the web console: every session of a Flow type, live events, approvals, steer and cancel (console extra)."""
    try:
        from dex_agents.console.server import TlsFiles, run_console
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in ("starlette", "uvicorn"):
            raise
        raise click.ClickException("the console needs the console extra: pip install 'dex-agents[console]'") from None

    from dex_agents.cli.data import choose_data_dir, embedded_dir

    async def command(out: Console) -> None:
        if token is not None:
            raise UsageError(TOKEN_FLAG_REFUSED)
        if not demo and (data is not None or in_memory):
            raise UsageError("--data and --in-memory are for the dev server of --demo")
        await run_console(
            out,
            server=server,
            flow_target=flow_target,
            demo=demo,
            host=host,
            port=port,
            token_file=token_file,
            tls=TlsFiles.of(tls_cert, tls_key),
            index_path=Path(index_path) if index_path else None,
            serve_worker=worker,
            data_dir=choose_data_dir(data, embedded_dir("console-demo"), in_memory=in_memory) if demo else None,
        )

    return run(command, debug=wants_debug(ctx, debug=debug))


@cli.command()
@click.option("--server", metavar="HOST:PORT", default=None, help="The Dex server (not with --demo).")
@click.option("--flow", "flow_target", metavar="MODULE:FLOW_FACTORY", default=None, help="The sessions' Flow.")
@click.option("--demo", is_flag=True, default=False, help="The dev server and the demo's order agent in this process.")
@click.option("--port", type=click.IntRange(0, 65535), default=8820, show_default=True, help="Port on 127.0.0.1.")
@click.option("--api-path", default="/api/chat", show_default=True, help="Where the chat API is served.")
@click.option("--static", "static_dir", type=click.Path(file_okay=False), default=None, help="Serve a page's files.")
@click.option("--worker/--no-worker", default=False, help="Also serve the Flow with a Worker here (default: no).")
@debug_option
@click.pass_context
def serve(
    ctx: click.Context,
    server: str | None,
    flow_target: str | None,
    demo: bool,
    port: int,
    api_path: str,
    static_dir: str | None,
    worker: bool,
    debug: bool,
) -> int:
    """Serve a Flow's sessions as a Vercel AI SDK chat backend: POST /api/chat, GET …/{id}/stream, …/{id}/messages."""
    try:
        from dex_agents.cli.serve import run_serve
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in ("starlette", "uvicorn"):
            raise
        raise click.ClickException("serve needs the ui extra: pip install 'dex-agents[ui]'") from None
    from pathlib import Path

    return run(
        lambda out: run_serve(
            out,
            server=server,
            flow_target=flow_target,
            demo=demo,
            port=port,
            api_path=api_path,
            static=Path(static_dir) if static_dir else None,
            serve_worker=worker,
        ),
        debug=wants_debug(ctx, debug=debug),
    )


@cli.command()
@click.option("--server", required=True, help="The Dex server's HOST:PORT (e.g. a `dexcli dev`).")
@debug_option
@click.pass_context
def conformance(ctx: click.Context, server: str, debug: bool) -> int:
    """Check the Dex server rules dex-agents relies on; one line each; exit 1 when one differs."""
    from dex_agents.testing.conformance import run_conformance

    outcome: list[int] = []

    async def command(console: Console) -> None:
        outcome.append(await run_conformance(server, lambda line: console.print(Text(line), soft_wrap=True)))

    failed = run(command, debug=wants_debug(ctx, debug=debug))
    return failed or (outcome[0] if outcome else 1)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="dex-agents", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        error.show(file=VisibleWriter(sys.stderr))  # type: ignore[arg-type]
        return error.exit_code
    except click.Abort:
        SafeConsole(stderr=True).print(Text("interrupted", style="yellow"))
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else EXIT_OK
