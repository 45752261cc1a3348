"""run_ui.py inside a network namespace (tests/support/netns.py), reachable from this host
at the namespace's address. Each namespace has its own ports, so the port is fixed."""

from __future__ import annotations

from pathlib import Path

from tests.support.netns import Node
from tests.support.ui_server import UiServer

PORT = 8080


class NodeUiServer(UiServer):
    """A UiServer whose process runs in ``node`` (``ip netns exec``: the same pid, so
    kill() and SIGKILL reach run_ui.py itself) and listens on the node's address."""

    def __init__(
        self,
        node: Node,
        usr_dir: Path,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        super().__init__(usr_dir, env=env, extra_args=extra_args)
        self.node = node
        self.host = node.address

    def pick_port(self) -> int:
        return PORT

    def command(self, python: Path) -> list[str]:
        return self.node.command(super().command(python))
