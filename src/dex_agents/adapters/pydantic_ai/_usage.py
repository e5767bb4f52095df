"""A turn's Pydantic AI usage across its Steps, and its `UsageLimits`.

A plain ``agent.run`` keeps one `RunUsage` for the run and checks the run's
`UsageLimits` against it: the request and token limits before and after each
model request, the tool call limit before a response's tools run. A session
turn is that run cut into Steps, so the runner carries the turn's usage
through them:

- each model Step runs the agent with ``usage=`` the turn's usage so far:
  the run state's (`RunState.usage`, what the turn's model calls used) plus
  what the tool Steps of the calls it answers reported (`AgentToolCall.usage`:
  the tools' own successful execution and agent runs inside them that share
  ``ctx.usage``), so Pydantic AI checks its limits against the turn's usage,
  and raises its own `UsageLimitExceeded`;
- the tool call limit is checked by the runner where a plain run checks it,
  when the model asked for tools and before any of them runs, counting every
  requested call (the model Steps' runs, which only hand calls on, do not
  check it);
- a tool Step reports what its run added to the usage it was given.

`UsageLimitExceeded` becomes `TurnFailedError`: the turn fails at once with
Pydantic AI's message (another attempt would repeat it), and what the failed
model call used is still counted.
"""

import dataclasses
from collections.abc import Iterable, Mapping

from pydantic import TypeAdapter
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents.application.runner import TurnFailedError
from dex_agents.domain.tools import AgentToolCall
from dex_agents.domain.usage import AgentUsage

_RUN_USAGE = TypeAdapter(RunUsage)

_RUN_USAGE_FIELDS = tuple(field.name for field in dataclasses.fields(RunUsage))

_NO_USAGE = RunUsage()  # never changed: the mark `agent_usage` measures from


def agent_usage(usage: RunUsage) -> AgentUsage:
    """Map Pydantic AI's run usage to the session's: what it added since no usage (`usage_since`)."""
    return usage_since(usage, _NO_USAGE)


def run_usage(usage: AgentUsage) -> RunUsage:
    """Map the session's usage back to Pydantic AI's (the fields both have)."""
    return RunUsage(
        requests=usage.model_calls,
        tool_calls=usage.tool_calls,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        output_reasoning_tokens=usage.reasoning_tokens,
    )


def copy_usage(usage: RunUsage) -> RunUsage:
    """Return an independent copy of ``usage``: its fields, with ``details`` a new dict.

    What ``dataclasses.replace(usage, details=dict(usage.details))`` returns (attributes that are not
    fields are not copied), without its per-field checks and ``__init__`` call: a Step copies usage
    several times.
    """
    if type(usage) is not RunUsage:
        return dataclasses.replace(usage, details=dict(usage.details))
    fresh = RunUsage.__new__(RunUsage)
    fresh.__dict__.update({name: getattr(usage, name) for name in _RUN_USAGE_FIELDS})
    fresh.details = dict(usage.details)
    return fresh


def usage_since(now: RunUsage, mark: RunUsage) -> AgentUsage:
    """The session usage of what ``now`` added since ``mark``: ``agent_usage(now - mark)``.

    Computed from the fields the session keeps only, without building the whole difference
    (every Step takes one).
    """
    return AgentUsage(
        model_calls=now.requests - mark.requests,
        input_tokens=now.input_tokens - mark.input_tokens,
        output_tokens=now.output_tokens - mark.output_tokens,
        cached_input_tokens=now.cache_read_tokens - mark.cache_read_tokens,
        reasoning_tokens=now.output_reasoning_tokens - mark.output_reasoning_tokens,
        tool_calls=now.tool_calls - mark.tool_calls,
    )


def dump_run_usage(usage: RunUsage) -> object:
    """``usage`` as JSON data: the fields that differ from their defaults (`load_run_usage` gives the rest back).

    Most of RunUsage's counters stay 0 in a turn; written out they made each tool call's record
    (which carries the turn's usage) larger than the 1 KiB above which Dex hands a value to a Worker
    as a blob ID, fetched with a ``LoadBlobs`` call of its own.
    """
    return _RUN_USAGE.dump_python(usage, mode="json", exclude_defaults=True)


def load_run_usage(data: object) -> RunUsage:
    """Read what `dump_run_usage` wrote (a missing field takes its default; records with every field still read).

    Raises:
        pydantic.ValidationError: ``data`` is not such usage.
    """
    return _RUN_USAGE.validate_python(data)


def turn_usage(so_far: RunUsage | None, records: Mapping[str, AgentToolCall], tool_call_ids: Iterable[str]) -> RunUsage:
    """The turn's usage as a resumed model Step starts: the run state's plus the answered calls' tool Steps'."""
    usage = RunUsage() if so_far is None else copy_usage(so_far)
    for tool_call_id in tool_call_ids:
        record = records.get(tool_call_id)
        if record is not None and record.usage is not None:
            usage.incr(run_usage(record.usage))
    return usage


def model_step_limits(limits: UsageLimits) -> UsageLimits:
    """The limits a model Step's run checks: all but the tool call limit, which the runner checks itself."""
    return dataclasses.replace(limits, tool_calls_limit=None)


def check_tool_calls(limits: UsageLimits, usage: RunUsage, requested: int, *, step_usage: AgentUsage) -> None:
    """Check the tool call limit before ``requested`` calls run, as a plain run does.

    Raises:
        TurnFailedError: the calls would exceed it (with Pydantic AI's message).
    """
    if limits.tool_calls_limit is None:
        return
    projected = copy_usage(usage)
    projected.tool_calls += requested
    try:
        limits.check_before_tool_call(projected)
    except UsageLimitExceeded as error:
        raise limit_failure(error, step_usage) from error


def limit_failure(error: UsageLimitExceeded, used: AgentUsage) -> TurnFailedError:
    """The turn failure for Pydantic AI's usage limit error; ``used`` is what the failed model call used."""
    kind = type(error)
    return TurnFailedError(f"{kind.__module__}.{kind.__qualname__}: {error}", usage=used)
