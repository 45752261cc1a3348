"""The glue between the agent loop (agent.py) and the journal (durability/).

One ``DurableSession`` per chat owns the chat's life; ``DurableChats`` makes the chats of a
process and admits their messages (the server's ``Runtime`` is in python/server).
docs/architecture.md has the module map.
"""

from python.durable.admission import Submission
from python.durable.chats import DurableChats
from python.durable.session import DurableSession, session_of

__all__ = ["DurableChats", "DurableSession", "Submission", "session_of"]
