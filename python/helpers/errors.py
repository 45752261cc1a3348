"""The loop's control exceptions (upstream's module; agent.py re-exports them).

- ``RepairableException``: the model can fix this; the text goes into history as a warning.
- ``InterventionException``: a user message arrived mid-iteration; the rest is skipped.
- ``HandledException``: already logged for the user; ends the chain.

And the refusals of the glue and the tools (``DomainError`` and its family, below).
"""

from __future__ import annotations

from typing import Any


class RepairableException(Exception):
    """The model can fix this: the text goes into history as a warning."""


class InterventionException(Exception):
    """A user message arrived mid-iteration: skip the rest of the iteration."""


class HandledException(Exception):
    """Already logged for the user; ends the chain."""


class CodedError(Exception):
    """A failure of one part (an extension, a prompt) with a stable ``code``; not a domain
    refusal: the HTTP edge does not map it."""

    code: str  # set by each subclass

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


class CodeError(Exception):
    """A failure whose stable ``code`` is chosen where it is raised (a reader's or a
    fetcher's: ``DocumentError``, ``FetchError``), with the message that says what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# ---- refusals -------------------------------------------------------------------------
# The glue's and the tools' refusals: the same shape as the journal's family
# (durability.errors.DurabilityError): a stable ``code``, a message and structured fields,
# never an HTTP status. The HTTP edge maps each code to its status in one table
# (python/server/errors.py); docs/errors.md documents every code.


class DomainError(Exception):
    """A refusal with a stable ``code`` and structured ``fields`` (never secrets)."""

    code: str = "domain_error"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        return {**self.fields, "code": self.code, "message": self.message}


class BadRequest(DomainError):
    """Input of a wrong type, missing or out of range; ``field`` names it where known."""

    code = "bad_request"


class ChatNotFound(DomainError):
    code = "context_not_found"


class ChatExists(DomainError):
    code = "context_exists"


class ChatStopped(DomainError):
    """The chat was stopped before it answered a caller that waited for the answer."""

    code = "chat_stopped"


class ShuttingDown(DomainError):
    code = "shutting_down"


class TaskBusy(DomainError):
    """A manual run of a scheduled task while its chat works or has an open run."""

    code = "task_busy"
