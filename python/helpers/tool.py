"""Tool base class and its Response. One Tool subclass per module in python/tools/."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, LoopData


@dataclass
class Response:
    """What a tool returns: text for the model and whether the monologue ends."""

    message: str
    break_loop: bool
    additional: dict[str, Any] | None = None


class Tool:
    """Lifecycle: before_execution -> execute -> after_execution (see Agent.execute_tool)."""

    #: (journal call id, args digest) set by the durable loop before execute; None without a
    #: journal. Tools with a receipt adapter (code_execution_tool) name their receipts by it.
    call_identity: tuple[str, str] | None = None

    def __init__(
        self,
        agent: Agent,
        name: str,
        method: str | None,
        args: dict[str, Any],
        message: str,
        loop_data: LoopData | None = None,
        **kwargs: Any,
    ) -> None:
        self.agent = agent
        self.name = name
        self.method = method
        self.args = args if isinstance(args, dict) else {}
        self.message = message
        self.loop_data = loop_data
        self.log: Any = None
        self.progress = ""

    async def execute(self, **kwargs: Any) -> Response:
        raise NotImplementedError

    async def before_execution(self, **kwargs: Any) -> None:
        """Open the tool's log item (the UI shows its arguments)."""
        self.log = self.get_log_object()

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        """Store the result in history and show it in the log item."""
        text = response.message.strip() if isinstance(response.message, str) else ""
        self.agent.hist_add_tool_result(self.name, text, **(response.additional or {}))
        if self.log is not None:
            self.log.update(content=self.agent.mask(text))

    def get_log_object(self) -> Any:
        heading = f"{self.agent.agent_name}: Using tool '{self.full_name}'"
        return self.agent.context.log.log(
            type="tool",
            heading=heading,
            content="",
            kvps=self.agent.mask_value(self.args),
            agentno=self.agent.number,
        )

    def set_progress(self, text: str) -> None:
        """Partial output kept for an intervention to save as the tool result."""
        self.progress = text

    @property
    def full_name(self) -> str:
        return f"{self.name}:{self.method}" if self.method else self.name
