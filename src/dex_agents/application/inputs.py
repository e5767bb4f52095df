"""The checks every client input passes, the same at the client, in the RPCs and in the Steps.

The client refuses a bad input before it sends anything, with
`InvalidInputError`; an RPC reached by other means applies the same checks
and answers ``False``; a Step that receives a first message the client did
not check (a raw ``start_flow``) records the turn as failed with the same
explanation. So a refused input is never accepted and then lost.

| input                                | refused when                                          |
|--------------------------------------|-------------------------------------------------------|
| user message, first message          | over ``max_input_text_bytes``, lone surrogate, NUL    |
| rejection reason                     | the same                                              |
| interrupt ID                         | empty, over 512 characters, ``/``, NUL, surrogate     |
| session ID                           | `session_id_problem`: empty, blank, over 512           |
|                                      | characters, space at an end, ``/``, controls, bidi     |
|                                      | and other invisible characters; ``$`` ``:`` to start   |

A blank user message is not an error: ``send_user_message`` answers
``False`` for it, as the spec says, and a blank first message starts no turn.
"""

from dex_agents.application.options import AgentSessionOptions
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.limits import (
    InputProblem,
    check_id,
    check_input_text,
    describe_input_problem,
    session_id_problem,
    utf8_size,
)


def text_refusal(
    text: object, *, options: AgentSessionOptions, field: str, what: str, allow_blank: bool = False
) -> InvalidInputError | None:
    """Return the error refusing a client text, or ``None`` when it may be accepted.

    ``field`` names the input (``"text"``), ``what`` describes it in the message ("the user message").
    """
    if not isinstance(text, str):
        return InvalidInputError(
            f"refused: {what} must be text, got {type(text).__name__}", problem=InputProblem.NOT_TEXT, field=field
        )
    problem = check_input_text(text, max_bytes=options.max_input_text_bytes, allow_blank=allow_blank)
    if problem is None:
        return None
    size = utf8_size(text) if problem is InputProblem.TOO_LARGE else 0
    message = describe_input_problem(problem, what=what, size=size, max_bytes=options.max_input_text_bytes)
    return InvalidInputError(f"refused: {message}", problem=problem, field=field)


def id_refusal(value: object, *, field: str, what: str, allow_slash: bool = True) -> InvalidInputError | None:
    """Return the error refusing an ID, or ``None`` when it may be sent."""
    if isinstance(value, str) and check_id(value, allow_slash=allow_slash) is None:
        return None
    message = describe_input_problem(InputProblem.INVALID_ID, what=what, size=0, max_bytes=0)
    return InvalidInputError(f"refused: {message}", problem=InputProblem.INVALID_ID, field=field)


def session_id_refusal(value: object, *, starting: bool = False) -> InvalidInputError | None:
    """Return the error refusing a session ID (`session_id_problem`), or ``None`` when it may be sent.

    ``starting``: the ID of a session about to be started, which must also keep clear of Dex's reserved characters.
    """
    if not isinstance(value, str):
        problem = f"must be text, got {type(value).__name__}"
    else:
        found = session_id_problem(value, starting=starting)
        if found is None:
            return None
        problem = found
    shown = repr(value) if isinstance(value, str) and len(value) <= 80 else "given"
    return InvalidInputError(
        f"refused: the session ID {shown} {problem}", problem=InputProblem.INVALID_ID, field="session_id"
    )
