// MCP servers in the Settings dialog: each configured server's state, tools and last error.
// The mcp_servers setting itself is edited with the other settings (Save); this section adds
// itself to the dialog and refreshes from /api/mcp_servers_status while the dialog is open.

import { callApi } from "./api.js";
import { el, requestOrder } from "./dom.js";

const REFRESH_MS = 2000;
let timer = null;
const refreshes = requestOrder();

function buildSection() {
  return el(
    "fieldset",
    { id: "mcp-servers", testid: "mcp-servers" },
    el("legend", { textContent: "MCP servers: status" }),
    el("p", { id: "mcp-servers-error", className: "error-text", hidden: true, testid: "mcp-servers-error" }),
    el("ul", { id: "mcp-servers-list", className: "mcp-list", testid: "mcp-servers-list" }),
  );
}

function renderStatus(status) {
  const list = document.getElementById("mcp-servers-list");
  if (!list) return;
  const rows = (status.servers || []).map((server) => {
    const state = el("span", { className: `mcp-state ${server.state}`, textContent: server.state, testid: `mcp-state-${server.name}` });
    const row = el("li", { testid: `mcp-server-${server.name}` }, el("strong", { textContent: server.name }), " ", state);
    if (server.connected) {
      row.append(el("div", { className: "key-state", textContent: `${server.tool_count} tools: ${server.tools.join(", ")}` }));
    }
    if (server.error) row.append(el("div", { className: "error-text", textContent: server.error }));
    return row;
  });
  if (status.config_error) rows.unshift(el("li", { className: "error-text", textContent: status.config_error }));
  if (!status.sdk_available && rows.length) {
    rows.unshift(el("li", { className: "error-text", textContent: "The mcp package is not installed (pip install -r requirements.txt)." }));
  }
  if (!rows.length) rows.push(el("li", { className: "key-state", textContent: "No MCP servers configured (setting mcp_servers)." }));
  list.replaceChildren(...rows);
}

async function refresh() {
  const box = document.getElementById("mcp-servers-error");
  const turn = refreshes.next(); // only the newest answer draws (an older one may be late)
  try {
    const status = await callApi("mcp_servers_status", {});
    if (!refreshes.newest(turn)) return;
    renderStatus(status);
    if (box) box.hidden = true;
  } catch (error) {
    if (box && refreshes.newest(turn)) {
      box.textContent = `${error.message} (${error.code || "error"})`;
      box.hidden = false;
    }
  }
}

function init() {
  const dialog = document.getElementById("settings-dialog");
  if (!dialog || document.getElementById("mcp-servers")) return;
  const section = buildSection();
  const anchor = dialog.querySelector("#settings-error");
  if (anchor) anchor.before(section);
  else (dialog.querySelector("form") || dialog).append(section);
  new MutationObserver(() => {
    clearInterval(timer);
    if (!dialog.open) return;
    refresh();
    timer = setInterval(refresh, REFRESH_MS);
  }).observe(dialog, { attributes: true, attributeFilter: ["open"] });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
