"""message_loop_prompts_after: the current date and time in every iteration's [EXTRAS].

As upstream, the time is not in the system prompt (which would then change every second)
but in the extras after the history, rendered from ``agent.system.datetime.md``.

The time is the one value in a prompt that is not deterministic: a resumed run rebuilds the
same iteration a minute later. The value is therefore named in ``params_temporary``
(``prompts.VOLATILE_KEY``), and the journal's digest of the messages
(python/durable/seams.py, ``prompts.stable_view``) counts it as a placeholder, so a
replayed call still matches its journaled intent instead of holding as
``replay_divergence``.
"""

from __future__ import annotations

from typing import Any

from python.helpers import localtime, prompts
from python.helpers.extensions import Extension


class IncludeCurrentDatetime(Extension):
    async def execute(self, loop_data: Any = None, **kwargs: Any) -> None:
        if loop_data is None:
            return
        value = localtime.now_text()
        text = self.agent.read_prompt("agent.system.datetime.md", date_time=value)
        loop_data.extras_temporary["current_datetime"] = text
        loop_data.params_temporary.setdefault(prompts.VOLATILE_KEY, []).append(value)
