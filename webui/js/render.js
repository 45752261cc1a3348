// Turns poll log items into DOM nodes (one node per log item number, updated in place).
// Answers and messages are Markdown (sanitised); tool output stays preformatted text.
// Items rebuilt from the journal after a restart carry a badge (restored / uncertain).

import { callApiRaw } from "./api.js";
import { renderMarkdown, renderText } from "./markdown.js";

const HEADINGS = {
  user: "You", agent: "Thinking", response: "Answer", tool: "Tool", code_exe: "Code",
  warning: "Warning", error: "Error", info: "Info", util: "Utility", hint: "Hint", progress: "Progress",
};
// log item types whose content is Markdown written by the model or a person
const MARKDOWN_TYPES = new Set(["response", "user", "warning", "info", "hint", "util"]);

function kvpText(value) {
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join("\n");
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

function renderKvps(container, kvps) {
  const rows = [];
  if (kvps && typeof kvps === "object") {
    for (const [key, value] of Object.entries(kvps)) {
      if (value === null || value === undefined || value === "") continue;
      if (key === "images" && Array.isArray(value)) continue; // shown as pictures
      const row = document.createElement("div");
      row.className = "kvp";
      const name = document.createElement("span");
      name.className = "kvp-key";
      name.textContent = key;
      const text = document.createElement("span");
      text.className = "kvp-value";
      text.textContent = kvpText(value);
      row.append(name, text);
      rows.push(row);
    }
  }
  container.replaceChildren(...rows);
  container.hidden = rows.length === 0;
}

// images a message or vision_load showed the model: journal blobs, read once per page
const imageUrls = new Map(); // blob digest -> Promise<object URL>

function imageUrl(blob) {
  if (!imageUrls.has(blob)) {
    const url = callApiRaw("image_get", { blob })
      .then((response) => response.blob())
      .then((data) => URL.createObjectURL(data));
    url.catch(() => imageUrls.delete(blob)); // a failed read is tried again next time
    imageUrls.set(blob, url);
  }
  return imageUrls.get(blob);
}

function renderImages(container, images) {
  const list = Array.isArray(images) ? images.filter((i) => i && typeof i.blob === "string") : [];
  const key = list.map((i) => i.blob).join(",");
  container.hidden = list.length === 0;
  if (container.dataset.key === key) return;
  container.dataset.key = key;
  container.replaceChildren(...list.map((image) => {
    const img = document.createElement("img");
    img.alt = image.name || "image";
    img.title = image.name || "";
    img.setAttribute("data-testid", "chat-image");
    imageUrl(image.blob).then((url) => { img.src = url; }, () => { img.alt = `${img.alt} (not available)`; });
    return img;
  }));
}

// items rebuilt from the journal after a restart (this fork): how the UI marks them
const RESTORED = {
  journal: {
    text: "restored from journal",
    title: "Rebuilt after a restart from the journal's recorded result; not run again.",
  },
  uncertain: {
    text: "uncertain: awaiting decision",
    title: "Started before the server stopped; whether it took effect is unknown. " +
      "Check it and decide in the Recovery panel.",
  },
};

function renderRestored(node, heading, item) {
  let badge = node.querySelector(".restored-badge");
  const mark = RESTORED[item.restored];
  if (!mark) {
    if (badge) badge.remove();
    return;
  }
  if (!badge) {
    badge = document.createElement("span");
    heading.after(badge);
  }
  badge.className = `restored-badge ${item.restored}`;
  badge.setAttribute("data-testid", item.restored === "uncertain" ? "uncertain-badge" : "restored-badge");
  badge.textContent = mark.text;
  badge.title = mark.title;
}

export function renderItem(node, item) {
  const type = item.type || "info";
  const restored = RESTORED[item.restored] ? ` restored-${item.restored}` : "";
  node.className = `msg ${type}${item.agentno ? " sub" : ""}${restored}`;
  node.dataset.restored = item.restored || "";
  if (item.call_id) node.dataset.callId = item.call_id;
  node.dataset.type = type;
  node.setAttribute("data-testid", `log-${type}`);
  node.dataset.no = String(item.no);
  let heading = node.querySelector(".heading");
  let content = node.querySelector(".content");
  let kvps = node.querySelector(".kvps");
  let pictures = node.querySelector(".images");
  if (!heading) {
    heading = document.createElement("div");
    heading.className = "heading";
    content = document.createElement("div");
    content.className = "content";
    kvps = document.createElement("div");
    kvps.className = "kvps";
    pictures = document.createElement("div");
    pictures.className = "images";
    node.append(heading, content, pictures, kvps);
  }
  const agent = item.agentno ? ` (A${item.agentno})` : "";
  heading.textContent = (item.heading || HEADINGS[type] || type) + agent;
  // thoughts stream as kvps; answers and tool output as content
  if (MARKDOWN_TYPES.has(type)) renderMarkdown(content, item.content);
  else renderText(content, item.content);
  content.hidden = !item.content;
  renderKvps(kvps, item.kvps);
  renderImages(pictures, item.kvps?.images);
  renderScreenshot(node, item);
  renderRestored(node, heading, item);
  renderSettingsLink(node, item);
}

// A turn that failed because the model cannot be called as configured (no key, unknown
// provider, a server that refuses connections): the error says what to fix and offers the
// way to Settings. Nothing was held; after the fix the next message works.
function renderSettingsLink(node, item) {
  const wanted = item.type === "error" && item.kvps && item.kvps.code === "model_not_configured";
  let guide = node.querySelector(".settings-guide");
  if (!wanted) {
    if (guide) guide.remove();
    return;
  }
  if (guide) return;
  guide = document.createElement("div");
  guide.className = "settings-guide";
  guide.setAttribute("data-testid", "model-guide");
  const text = document.createElement("span");
  const setting = item.kvps.setting ? ` (${item.kvps.setting})` : "";
  text.textContent = `The model is not configured${setting}: nothing was sent and nothing waits ` +
    "for a decision. Fix it in Settings, then send your message again.";
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Open Settings";
  button.setAttribute("data-testid", "guide-settings");
  button.addEventListener("click", () => document.dispatchEvent(new CustomEvent("open-settings")));
  guide.append(text, button);
  node.append(guide);
}

// A browser_agent step shows the screenshot taken after it (fetched with the session's
// CSRF token, shown from a blob URL: the page's CSP allows blob: images).
function renderScreenshot(node, item) {
  const hash = item.type === "browser" && item.kvps ? item.kvps.screenshot : "";
  if (!hash || !item.context || node.dataset.screenshot === hash) return;
  node.dataset.screenshot = hash;
  let img = node.querySelector("img.browser-shot");
  if (!img) {
    img = document.createElement("img");
    img.className = "browser-shot";
    img.alt = "Browser screenshot";
    img.setAttribute("data-testid", "browser-screenshot");
    node.append(img);
  }
  callApiRaw("browser_screenshot", { context_id: item.context, hash })
    .then((response) => response.blob())
    .then((blob) => { img.src = URL.createObjectURL(blob); })
    .catch(() => { img.alt = "Screenshot not available on this server"; });
}
