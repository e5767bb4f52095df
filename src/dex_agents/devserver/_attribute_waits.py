"""``WaitForAttribute``: a Client waits until a scalar Attribute of a Flow's current run matches.

The request is SDK 1.23's (``AttributeMatch``: a key, an operator and a scalar
operand; ``request_timeout_seconds``; ``internal_handler_timeout_seconds``).
String and bool Attributes compare for (in)equality only, int and float ones
with every operator; a missing Attribute never matches (``AttributeMatch``'s
contract in the SDK). The answer is the matching value, sent once it is on
disk: a value the Client saw is never lost in a restart.

What it answers with, as the SDK maps it:

- the matching value (``WaitForAttributeResponse.matched_value``);
- ``DEADLINE_EXCEEDED`` / long-poll time-out when nothing matched within the
  request's wait (its request timeout, else the server's default long poll, and
  at most its handler timeout): the SDK asks again until its own request budget
  is spent, then raises ``RequestTimeoutError``;
- the not-active error when the run is closed or closes first
  (``FlowNotActiveOrNotFoundError``), not-found for an unknown Flow ID;
- ``INVALID_ARGUMENT`` for a request without a Flow ID or key, an unknown
  operator, a non-scalar operand, or an ordering on a string or bool.

Real Dex serves this wait as a synchronous Temporal Update
(``server/service/api/service.go``, ``WaitForAttribute``); the snapshot we cite
takes an equality condition only, SDK 1.23 sends the operator form served here.
"""

import asyncio
from collections.abc import Callable

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._errors import flow_not_active, invalid_argument, long_poll_timeout
from dex_agents.devserver._journal import Journal
from dex_agents.devserver._state import Run, first_set
from dex_agents.devserver._store import StoreWriteError

_EQUALITY = frozenset({pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL, pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL})
_NUMBERS = frozenset({"int_value", "double_value"})
_SCALARS = frozenset({"string_value", "bool_value", *_NUMBERS})
_COMPARE: dict[int, Callable[[object, object], bool]] = {
    pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL: lambda a, b: a == b,
    pb.ATTRIBUTE_MATCH_OPERATOR_NOT_EQUAL: lambda a, b: a != b,
    pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN: lambda a, b: a > b,  # type: ignore[operator]
    pb.ATTRIBUTE_MATCH_OPERATOR_GREATER_THAN_OR_EQUAL: lambda a, b: a >= b,  # type: ignore[operator]
    pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN: lambda a, b: a < b,  # type: ignore[operator]
    pb.ATTRIBUTE_MATCH_OPERATOR_LESS_THAN_OR_EQUAL: lambda a, b: a <= b,  # type: ignore[operator]
}


def check_match(match: pb.AttributeMatch) -> None:
    """Refuse a match the server cannot evaluate (``INVALID_ARGUMENT``)."""
    if not match.key:
        raise invalid_argument("an Attribute wait needs the Attribute's key")
    if match.operator not in _COMPARE:
        raise invalid_argument(f"unknown Attribute match operator {match.operator}")
    kind = match.operand.WhichOneof("kind")
    if kind not in _SCALARS:
        raise invalid_argument(f"an Attribute match needs a string, int, float or bool operand, not {kind}")
    if kind not in _NUMBERS and match.operator not in _EQUALITY:
        raise invalid_argument(f"a {kind.removesuffix('_value')} Attribute compares for equality only")


def matches(value: pb.Value | None, match: pb.AttributeMatch) -> bool:
    """Whether the stored ``value`` satisfies ``match`` (a missing value, or one of another kind, never does)."""
    if value is None:
        return False
    kind, wanted = value.WhichOneof("kind"), match.operand.WhichOneof("kind")
    if kind != wanted and not (kind in _NUMBERS and wanted in _NUMBERS):
        return False
    assert kind is not None
    assert wanted is not None
    return _COMPARE[match.operator](getattr(value, kind), getattr(match.operand, wanted))


class AttributeWaits:
    """Answers ``WaitForAttribute`` from the runs a `RunLookup` finds."""

    def __init__(
        self,
        run: Callable[[str], Run],
        journal: Journal,
        reloaded: Callable[[], asyncio.Event],
        default_wait: float,
        cap: Callable[[float], float],
    ) -> None:
        self._run = run
        self._journal = journal
        self._reloaded = reloaded
        self._default_wait = default_wait
        self._cap = cap

    async def wait(self, request: pb.WaitForAttributeRequest) -> pb.WaitForAttributeResponse:
        """Wait until the current run's Attribute matches; see the module docstring."""
        if not request.flow_id:
            raise invalid_argument("an Attribute wait needs a Flow ID")
        check_match(request.match)
        wait = float(request.request_timeout_seconds or self._default_wait)
        if request.internal_handler_timeout_seconds > 0:
            wait = min(wait, float(request.internal_handler_timeout_seconds))
        deadline = asyncio.get_running_loop().time() + self._cap(wait)
        while True:
            run = self._run(request.flow_id)  # the latest run: a restarted Flow's new run is the current one
            if not run.running or run.closing:
                raise flow_not_active(request.flow_id)
            changed = run.attribute_waits.get(request.match.key)
            if changed is None:
                changed = run.attribute_waits[request.match.key] = asyncio.Event()
            reloaded = self._reloaded()
            value = run.attributes.get(request.match.key)
            if matches(value, request.match):
                assert value is not None
                try:
                    await self._journal.durable(run.journal_seq, sync=False)
                except StoreWriteError:
                    # The write was dropped with a failed commit: ask the run read back from disk again.
                    events: tuple[asyncio.Event, ...] = (reloaded,)
                else:
                    return pb.WaitForAttributeResponse(matched_value=value)
            else:
                events = (changed, run.closed, reloaded)
            if not await first_set(events, max(deadline - asyncio.get_running_loop().time(), 0.0)):
                raise long_poll_timeout(f"Attribute {request.match.key!r} of {request.flow_id} did not match")
