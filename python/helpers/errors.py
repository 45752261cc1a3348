"""The loop's control exceptions (upstream's module; agent.py re-exports them).

- ``RepairableException``: the model can fix this; the text goes into history as a warning.
- ``InterventionException``: a user message arrived mid-iteration; the rest is skipped.
- ``HandledException``: already logged for the user; ends the chain.
"""

from __future__ import annotations


class RepairableException(Exception):
    """The model can fix this: the text goes into history as a warning."""


class InterventionException(Exception):
    """A user message arrived mid-iteration: skip the rest of the iteration."""


class HandledException(Exception):
    """Already logged for the user; ends the chain."""
