// Markdown to safe HTML: marked parses, highlight.js colours code, DOMPurify sanitises.
// Everything a model or a user wrote is untrusted: no HTML reaches the page unsanitised.

import { Marked } from "/vendor/marked/marked.esm.js";
import DOMPurify from "/vendor/dompurify/purify.es.mjs";
import hljs from "/vendor/highlight/core.min.js";
import bash from "/vendor/highlight/languages/bash.min.js";
import css from "/vendor/highlight/languages/css.min.js";
import diff from "/vendor/highlight/languages/diff.min.js";
import dockerfile from "/vendor/highlight/languages/dockerfile.min.js";
import ini from "/vendor/highlight/languages/ini.min.js";
import javascript from "/vendor/highlight/languages/javascript.min.js";
import json from "/vendor/highlight/languages/json.min.js";
import markdown from "/vendor/highlight/languages/markdown.min.js";
import plaintext from "/vendor/highlight/languages/plaintext.min.js";
import python from "/vendor/highlight/languages/python.min.js";
import sql from "/vendor/highlight/languages/sql.min.js";
import typescript from "/vendor/highlight/languages/typescript.min.js";
import xml from "/vendor/highlight/languages/xml.min.js";
import yaml from "/vendor/highlight/languages/yaml.min.js";

const LANGUAGES = {
  bash, css, diff, dockerfile, ini, javascript, json, markdown, plaintext, python, sql,
  typescript, xml, yaml,
};
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);
hljs.registerAliases(["sh", "shell", "console", "zsh"], { languageName: "bash" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["js", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts"], { languageName: "typescript" });
hljs.registerAliases(["yml"], { languageName: "yaml" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["text", "txt"], { languageName: "plaintext" });

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function highlighted(text, lang) {
  const name = (lang || "").trim().split(/\s+/)[0].toLowerCase();
  if (name && hljs.getLanguage(name)) {
    return { html: hljs.highlight(text, { language: name, ignoreIllegals: true }).value, name };
  }
  return { html: escapeHtml(text), name: "" };
}

const parser = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }) {
      const { html, name } = highlighted(text, lang);
      const cls = name ? ` class="hljs language-${name}"` : ' class="hljs"';
      return `<pre><code${cls}>${html}</code></pre>\n`;
    },
  },
});

// Links leave the app in a new tab and never get the opener.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const PURIFY = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style"],
  ADD_ATTR: ["target"],
};

/** Markdown text as sanitised HTML (a string safe to assign to innerHTML). */
export function markdownToHtml(text) {
  const html = parser.parse(String(text ?? ""), { async: false });
  return DOMPurify.sanitize(html, PURIFY);
}

const rendered = new WeakMap(); // node -> the Markdown source it shows

/** Render Markdown into ``node`` (only when the text changed: streaming updates are cheap). */
export function renderMarkdown(node, text) {
  const source = String(text ?? "");
  if (rendered.get(node) === source) return;
  rendered.set(node, source);
  node.classList.add("markdown");
  node.innerHTML = markdownToHtml(source);
}

/** Plain preformatted text (tool output, command lines). */
export function renderText(node, text) {
  rendered.delete(node);
  node.classList.remove("markdown");
  node.textContent = String(text ?? "");
}
