"""Answers render as Markdown in a real browser, and HTML in them stays inert."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000

ANSWER = """## Files

I found **five** files:

- `a.txt`
- `b.txt`

| name | size |
| --- | --- |
| a.txt | 12 |

See [the docs](https://example.org/docs).

```python
def hello():
    return 42
```

<img src=x onerror="window.__xss_img = 1; alert('img')">
<script>window.__xss_script = 1; alert('script')</script>
[click me](javascript:window.__xss_link=1)
<a href="#" onclick="window.__xss_click = 1">plain</a>
"""


def test_answer_renders_markdown_and_untrusted_html_never_runs(
    page: Page, running_ui, model_server
):
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    model_server.tool("response", {"text": ANSWER})
    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("List the **files** please")
    page.get_by_test_id("send-button").click()

    answer = page.get_by_test_id("log-response").locator(".content")
    expect(answer.locator("h2")).to_have_text("Files", timeout=TIMEOUT_MS)
    expect(answer.locator("strong")).to_have_text("five")
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(answer.locator("table td").first).to_have_text("a.txt")
    link = answer.locator("a", has_text="the docs")
    expect(link).to_have_attribute("href", "https://example.org/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    code = answer.locator("pre code.language-python")
    expect(code).to_contain_text("def hello():")
    expect(code.locator("span.hljs-keyword").first).to_have_text("def")
    # the user's own message is Markdown too
    expect(page.get_by_test_id("log-user").locator(".content strong")).to_have_text("files")

    # the dangerous parts are gone from the DOM, and nothing ran
    assert answer.locator("script").count() == 0
    image = answer.locator("img")
    expect(image).to_have_count(1)
    assert image.get_attribute("onerror") is None
    page.wait_for_function("document.querySelector('.msg.response img').complete")
    assert answer.locator("[onclick]").count() == 0
    click_me = answer.locator("a", has_text="click me")
    if click_me.count():
        assert not (click_me.get_attribute("href") or "").startswith("javascript:")
        click_me.click()
    flags = page.evaluate(
        "[window.__xss_img, window.__xss_script, window.__xss_link, window.__xss_click]"
    )
    assert flags == [None, None, None, None]
    assert dialogs == []
