"""The one yes/no parser of tool arguments (#18: written once for every tool)."""

from __future__ import annotations

import pytest

from python.helpers import tool
from python.tools import browser_agent, call_subordinate, code_execution_tool

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", [True, "true", " TRUE ", "1", 1, "yes", "on"])
def test_yes(value):
    assert tool.truthy(value) is True


@pytest.mark.parametrize("value", [False, None, "", "false", "0", 0, "no", "off", "maybe"])
def test_no(value):
    assert tool.truthy(value) is False


def test_the_tools_share_it():
    for module in (browser_agent, call_subordinate, code_execution_tool):
        assert module.truthy is tool.truthy, module.__name__
