// MCP servers in the Settings dialog: the mcp_servers JSON, an Apply button and each server's
// state, tools and last error. Self-contained: it adds its own section to the dialog and
// refreshes while the dialog is open (/api/mcp_servers_status, /api/mcp_servers_apply).

import { callApi } from "./api.js";

const REFRESH_MS = 2000;
let timer = null;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "testid") node.setAttribute("data-testid", value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

function buildSection() {
  const text = el("textarea", { id: "mcp-servers-text", rows: 6, spellcheck: false, testid: "mcp-servers-text" });
  text.placeholder = '{"mcpServers": {"name": {"command": "...", "args": []}}}';
  const apply = el("button", { type: "button", id: "mcp-servers-apply", testid: "mcp-servers-apply", textContent: "Apply MCP servers" });
  const error = el("p", { id: "mcp-servers-error", className: "error-text", hidden: true, testid: "mcp-servers-error" });
  const list = el("ul", { id: "mcp-servers-list", className: "mcp-list", testid: "mcp-servers-list" });
  const section = el(
    "fieldset",
    { id: "mcp-servers", testid: "mcp-servers" },
    el("legend", { textContent: "MCP servers" }),
    el("label", {}, "mcp_servers (JSON, Agent Zero's format)", text),
    apply,
    error,
    list,
  );
  apply.addEventListener("click", () => applyConfig(text.value));
  return section;
}

function renderStatus(status) {
  const list = document.getElementById("mcp-servers-list");
  if (!list) return;
  const rows = (status.servers || []).map((server) => {
    const state = el("span", { className: `mcp-state ${server.state}`, textContent: server.state, testid: `mcp-state-${server.name}` });
    const tools = server.connected ? `${server.tool_count} tools: ${server.tools.join(", ")}` : "";
    const row = el("li", { testid: `mcp-server-${server.name}` }, el("strong", { textContent: server.name }), " ", state);
    if (tools) row.append(el("div", { className: "key-state", textContent: tools }));
    if (server.error) row.append(el("div", { className: "error-text", textContent: server.error }));
    return row;
  });
  if (status.config_error) rows.unshift(el("li", { className: "error-text", textContent: status.config_error }));
  if (!rows.length) rows.push(el("li", { className: "key-state", textContent: "No MCP servers configured." }));
  list.replaceChildren(...rows);
}

function showError(error) {
  const box = document.getElementById("mcp-servers-error");
  if (!box) return;
  box.textContent = error ? `${error.message} (${error.code || "error"})` : "";
  box.hidden = !error;
}

async function refresh() {
  try {
    renderStatus(await callApi("mcp_servers_status", {}));
  } catch (error) {
    showError(error);
  }
}

async function applyConfig(text) {
  showError(null);
  try {
    renderStatus(await callApi("mcp_servers_apply", { mcp_servers: text }));
  } catch (error) {
    showError(error);
  }
}

async function opened() {
  showError(null);
  try {
    const view = await callApi("settings_get", {});
    document.getElementById("mcp-servers-text").value = view.settings?.mcp_servers ?? "";
  } catch (error) {
    showError(error);
  }
  await refresh();
  clearInterval(timer);
  timer = setInterval(refresh, REFRESH_MS);
}

function init() {
  const dialog = document.getElementById("settings-dialog");
  if (!dialog || document.getElementById("mcp-servers")) return;
  const section = buildSection();
  const anchor = dialog.querySelector("#settings-error");
  if (anchor) anchor.before(section);
  else (dialog.querySelector("form") || dialog).append(section);
  new MutationObserver(() => {
    if (dialog.open) opened();
    else clearInterval(timer);
  }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
