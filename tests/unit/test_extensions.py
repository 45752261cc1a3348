"""Extension discovery, ordering, override by file name, sync and async execution."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from python.helpers import extensions, files
from python.helpers.extensions import ExtensionError, call_extensions, call_extensions_sync

pytestmark = pytest.mark.unit

TEMPLATE = """
from python.helpers.extensions import Extension

class Ext(Extension):
    {kind}def execute(self, calls=None, **kwargs):
        calls.append(({label!r}, self.agent.name if self.agent else None, kwargs))
"""


@pytest.fixture
def tree(tmp_path, monkeypatch, _private_usr_dir):
    base = tmp_path / "base"
    monkeypatch.setattr(files, "BASE_DIR", base)
    return SimpleNamespace(
        usr=_private_usr_dir / "agents" / "dev" / "extensions",
        profile=base / "agents" / "dev" / "extensions",
        default=base / "python" / "extensions",
    )


def put(folder, point, name, label, kind="async "):
    target = folder / point / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(TEMPLATE.format(kind=kind, label=label))
    return target


def agent(profile="dev"):
    return SimpleNamespace(name="A0", config=SimpleNamespace(profile=profile))


async def test_order_and_override_by_file_name(tree):
    put(tree.default, "monologue_start", "_10_a.py", "default a")
    put(tree.default, "monologue_start", "_50_b.py", "default b", kind="")
    put(tree.default, "monologue_start", "_90_c.py", "default c")
    put(tree.profile, "monologue_start", "_50_b.py", "profile b")
    put(tree.profile, "monologue_start", "_20_p.py", "profile p")
    put(tree.usr, "monologue_start", "_10_a.py", "usr a")
    calls: list = []
    await call_extensions("monologue_start", agent(), calls=calls, x=1)
    assert [c[0] for c in calls] == ["usr a", "profile p", "profile b", "default c"]
    assert calls[0][1:] == ("A0", {"x": 1})


async def test_without_profile_only_defaults_run(tree):
    put(tree.default, "p", "_10_a.py", "default a")
    put(tree.profile, "p", "_05_x.py", "profile x")
    calls: list = []
    await call_extensions("p", None, calls=calls)
    await call_extensions("p", agent(profile=None), calls=calls)
    assert [c[0] for c in calls] == ["default a", "default a"]
    await call_extensions("no_such_point", agent(), calls=calls)
    assert len(calls) == 2


async def test_module_cache_follows_file_changes(tree):
    path = put(tree.default, "p", "_10_a.py", "first")
    calls: list = []
    await call_extensions("p", None, calls=calls)
    path.write_text(TEMPLATE.format(kind="", label="second"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    await call_extensions("p", None, calls=calls)
    assert [c[0] for c in calls] == ["first", "second"]


def test_sync_point(tree):
    put(tree.default, "agent_init", "_10_a.py", "sync", kind="")
    calls: list = []
    call_extensions_sync("agent_init", agent(), calls=calls)
    assert [c[0] for c in calls] == ["sync"]


async def test_async_extension_at_sync_point_inside_loop_is_an_error(tree):
    put(tree.default, "hist_add_before", "_10_a.py", "async")
    with pytest.raises(ExtensionError, match="must not be async") as info:
        call_extensions_sync("hist_add_before", agent(), calls=[])
    assert info.value.code == "extension_error"


async def test_broken_extension_file_names_the_file(tree):
    target = tree.default / "p" / "_10_broken.py"
    target.parent.mkdir(parents=True)
    target.write_text("def broken(:\n")
    with pytest.raises(ExtensionError, match=r"p/_10_broken\.py failed to load"):
        await call_extensions("p", None)


async def test_errors_inside_execute_propagate(tree):
    target = tree.default / "p" / "_10_raise.py"
    target.parent.mkdir(parents=True)
    target.write_text(
        "from python.helpers.extensions import Extension\n"
        "class Boom(Extension):\n"
        "    async def execute(self, **kwargs):\n"
        "        raise LookupError('boom')\n"
    )
    with pytest.raises(LookupError, match="boom"):
        await call_extensions("p", None)


def test_point_names_cannot_escape(tree):
    with pytest.raises(ExtensionError):
        extensions.extension_files("../../etc")


def test_repository_extensions_load():
    for point in ("system_prompt", "reasoning_stream", "response_stream"):
        for path in extensions.extension_files(point, "agent0"):
            assert extensions._load(path), path


async def test_an_upstream_extension_importing_the_extension_module_loads(tree):
    target = tree.default / "p" / "_10_upstream.py"
    target.parent.mkdir(parents=True)
    target.write_text(
        "from python.helpers.extension import Extension\n"
        "from python.helpers.errors import RepairableException\n"
        "class Upstream(Extension):\n"
        "    async def execute(self, calls=None, **kwargs):\n"
        "        calls.append(RepairableException.__name__)\n"
    )
    calls: list[str] = []
    await call_extensions("p", None, calls=calls)
    assert calls == ["RepairableException"]


def test_the_loop_exceptions_live_in_errors_and_agent_re_exports_them():
    import agent
    from python.helpers import errors

    for name in ("RepairableException", "InterventionException", "HandledException"):
        assert getattr(agent, name) is getattr(errors, name)
