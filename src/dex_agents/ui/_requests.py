"""What a chat POST asks for: the body ``DefaultChatTransport`` sends, read and refused with a reason.

The session keeps its own history, so only the body's ``id`` (the session ID)
and its last message are read: a user message's text parts (`SendText`), or
the approval answers of an assistant message's ``approval-responded`` tool
parts (`AnswerApprovals`). Everything else is refused with `ChatRequestError`
(its HTTP status and a sentence): a body that is not a JSON object, no ``id``,
no or empty ``messages``, ``trigger: "regenerate-message"`` (durable history
is not rewritten), a last message that is neither of the two, an approval
whose ``approved`` is not a boolean.
"""

import json
from typing import Any

import attrs

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest body read (the whole chat comes along with every POST)."""


class ChatRequestError(Exception):
    """A request refused: the HTTP status and the reason the JSON error body carries."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@attrs.frozen(kw_only=True)
class SendText:
    """A user message: start the session if needed and send its text."""

    session_id: str
    text: str
    message_id: str | None
    """The page's ID of the message (stored as its client message ID), when it gave one."""


@attrs.frozen(kw_only=True)
class Answer:
    """One approval answer."""

    approval_id: str
    approved: bool
    reason: str | None


@attrs.frozen(kw_only=True)
class AnswerApprovals:
    """Approval answers (``addToolApprovalResponse`` then ``sendMessage()``)."""

    session_id: str
    answers: tuple[Answer, ...]


ChatRequest = SendText | AnswerApprovals


def parse_chat_request(body: bytes) -> ChatRequest:
    """Read a POST body.

    Raises:
        ChatRequestError: the body is refused (status 400).
    """
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ChatRequestError(400, "the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ChatRequestError(400, "the body must be a JSON object")
    session_id = data.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise ChatRequestError(400, "the body needs the chat's `id` (the session ID) as a non-empty string")
    trigger = data.get("trigger", "submit-message")
    if trigger == "regenerate-message":
        raise ChatRequestError(400, "regenerate-message is not supported: a session's durable history is not rewritten")
    if trigger != "submit-message":
        raise ChatRequestError(400, f"unknown trigger {trigger!r}: only submit-message is accepted")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatRequestError(400, "the body needs a non-empty `messages` list")
    last = messages[-1]
    if not isinstance(last, dict) or not isinstance(last.get("parts"), list):
        raise ChatRequestError(400, "the last message must be an object with a `parts` list")
    role, parts = last.get("role"), last["parts"]
    if role == "user":
        texts = [part["text"] for part in parts if _is_text(part)]
        text = "\n".join(texts)
        if not text.strip():
            raise ChatRequestError(400, "the last message is a user message without text")
        message_id = last.get("id")
        return SendText(
            session_id=session_id, text=text, message_id=message_id if isinstance(message_id, str) else None
        )
    if role == "assistant":
        answers = tuple(_answer(part) for part in parts if _is_responded(part))
        if answers:
            return AnswerApprovals(session_id=session_id, answers=answers)
    raise ChatRequestError(
        400, "the last message must be a user message with text or an assistant message with an approval-responded part"
    )


def _is_text(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _is_responded(part: object) -> bool:
    return isinstance(part, dict) and part.get("state") == "approval-responded"


def _answer(part: dict[str, Any]) -> Answer:
    approval = part.get("approval")
    if not isinstance(approval, dict) or not isinstance(approval.get("id"), str) or not approval["id"]:
        raise ChatRequestError(400, "an approval-responded part needs `approval.id`")
    approved = approval.get("approved")
    if not isinstance(approved, bool):
        raise ChatRequestError(400, f"approval {approval['id']!r}: `approved` must be true or false")
    reason = approval.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ChatRequestError(400, f"approval {approval['id']!r}: `reason` must be text")
    return Answer(approval_id=approval["id"], approved=approved, reason=reason or None)
