"""Prompt lookup along profile folders and the template syntax."""

from __future__ import annotations

import pytest

from python.helpers import files, prompts
from python.helpers.prompts import (
    PromptError,
    PromptIncludeLoop,
    PromptNotFound,
    PromptSyntaxError,
    render,
    render_text,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def dirs(tmp_path):
    folders = [tmp_path / "usr", tmp_path / "profile", tmp_path / "base"]
    for folder in folders:
        folder.mkdir()
    return folders


def write(folder, name, text):
    (folder / name).write_text(text, encoding="utf-8")


def test_variables_and_missing_placeholders(dirs):
    write(dirs[2], "a.md", "Hi {{name}}, {{ name }}; {{missing}} {{ not a tag }}")
    assert render("a.md", dirs, name="Ada") == "Hi Ada, Ada; {{missing}} {{ not a tag }}"


def test_values_are_not_reparsed_and_non_text_is_json(dirs):
    write(dirs[2], "a.md", "{{x}} {{y}} {{z}}")
    out = render("a.md", dirs, x="{{y}}", y=[1, "é"], z=3)
    assert out == '{{y}} [1, "é"] 3'


def test_first_folder_wins_and_include_searches_all(dirs):
    write(dirs[2], "main.md", '[{{ include "part.md" }}]')
    write(dirs[2], "part.md", "base part")
    write(dirs[1], "part.md", "profile part {{v}}")
    assert render("main.md", dirs, v=1) == "[profile part 1]"
    write(dirs[0], "main.md", "usr main {{ include 'part.md' }}")
    assert render("main.md", dirs, v=2) == "usr main profile part 2"


def test_include_original_takes_next_lower_file(dirs):
    write(dirs[2], "role.md", "base role")
    write(dirs[1], "role.md", "profile+{{ include original }}")
    write(dirs[0], "role.md", "usr+{{include original}}")
    assert render("role.md", dirs) == "usr+profile+base role"
    with pytest.raises(PromptNotFound):
        render_text("{{ include original }}", dirs)


def test_include_original_at_bottom_is_not_found(dirs):
    write(dirs[2], "x.md", "{{ include original }}")
    with pytest.raises(PromptNotFound) as info:
        render("x.md", dirs)
    assert info.value.code == "prompt_not_found"


def test_if_blocks(dirs):
    write(
        dirs[2],
        "u.md",
        "{{if sys}}[system: {{sys}}]\n{{endif}}{{msg}}{{if att}} att{{else}} none{{endif}}"
        "{{if a}}A{{if b}}B{{else}}b{{endif}}{{else}}-{{if b}}x{{endif}}{{endif}}",
    )
    assert render("u.md", dirs, sys="", msg="hi", att=[], a=1, b=0) == "hi noneAb"
    assert render("u.md", dirs, sys="s", msg="hi", att=["f"], a=0, b=1) == ("[system: s]\nhi att-x")
    assert render("u.md", dirs, msg="m", a=1, b=1) == "m noneAB"


def test_repository_prompts_render():
    dirs = prompts.prompt_dirs("agent0")
    out = render("fw.user_message.md", dirs, message="hello", system_message="", attachments=[])
    assert out.strip() == "hello"
    main = render("agent.system.main.md", dirs)
    assert "{{ include" not in main


@pytest.mark.parametrize(
    "text", ["{{if a}}x", "x{{endif}}", "{{else}}", "{{if a}}{{else}}{{else}}{{endif}}"]
)
def test_unbalanced_if_is_a_syntax_error(text):
    with pytest.raises(PromptSyntaxError) as info:
        render_text(text, [], a=1)
    assert info.value.code == "prompt_syntax_error"


def test_missing_file_and_bad_names(dirs):
    with pytest.raises(PromptNotFound, match=r"nope\.md") as info:
        render("nope.md", dirs)
    assert info.value.to_dict() == {"code": "prompt_not_found", "message": info.value.message}
    write(dirs[2], "inc.md", '{{ include "gone.md" }}')
    with pytest.raises(PromptNotFound, match=r"gone\.md"):
        render("inc.md", dirs)
    for bad in ("../secret.md", "/etc/passwd", ""):
        with pytest.raises(PromptNotFound):
            render(bad, dirs)


def test_include_loops_are_errors(dirs):
    write(dirs[2], "a.md", '{{ include "b.md" }}')
    write(dirs[2], "b.md", '{{ include "a.md" }}')
    write(dirs[2], "self.md", '{{ include "self.md" }}')
    with pytest.raises(PromptIncludeLoop, match=r"a\.md -> b\.md -> a\.md"):
        render("a.md", dirs)
    with pytest.raises(PromptIncludeLoop):
        render("self.md", dirs)


def test_prompt_dirs_order(_private_usr_dir):
    assert prompts.prompt_dirs(None) == [files.BASE_DIR / "prompts"]
    assert prompts.prompt_dirs("dev") == [
        _private_usr_dir / "agents" / "dev" / "prompts",
        files.BASE_DIR / "agents" / "dev" / "prompts",
        files.BASE_DIR / "prompts",
    ]
    for bad in ("../x", "a/b", ".hidden"):
        with pytest.raises(PromptError):
            prompts.prompt_dirs(bad)
