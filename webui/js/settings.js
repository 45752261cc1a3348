// The settings dialog: every setting the server describes, grouped; errors next to their field.
// Keys and the API token are write-only: the UI only learns "set" or "not set".

import { callApi } from "./api.js";
import { confirmAction } from "./confirm.js";

const dialog = () => document.getElementById("settings-dialog");
const form = () => document.getElementById("settings-form");

// Groups by name prefix, in display order; anything else lands in "Other".
const GROUPS = [
  ["chat_model_", "Chat model (the agent's main model)"],
  ["util_model_", "Utility model (summaries, chat names)"],
  ["embed_model_", "Embedding model (memory and knowledge)"],
  ["memory_", "Memory (recall and memorize)"],
  ["agent_", "Agent"],
  ["mcp_", "External API and MCP"],
  ["code_exec_", "Code execution"],
  ["searxng_", "Web search"],
  ["document_query_", "Documents (document_query)"],
  ["browser_", "Browser agent"],
  ["retention_", "Journal retention"],
];
const HELP = {
  provider: "Provider id from conf/model_providers.yaml.",
  name: "Model name as the provider spells it.",
  api_base: "Endpoint URL; empty uses the provider's default.",
  ctx_length: "The model's context window in tokens.",
  ctx_history: "Share of the window (above 0, at most 1) the history may fill.",
  ctx_input: "Share of the window (above 0, at most 1) one input may fill; longer input keeps its end.",
  kwargs: 'Extra request parameters as a JSON object, e.g. {"temperature": 0}.',
  rl_requests: "Most requests per 60 seconds; 0 means no limit.",
  rl_input: "Most input tokens per 60 seconds; 0 means no limit.",
  rl_output: "Most output tokens per 60 seconds; 0 means no limit.",
  agent_profile: "The profile new chats use (agents/<profile>/).",
  chat_model_vision: "The chat model can see images: attachments go with the message, and the vision_load tool is offered.",
  agent_memory_subdir: "Which memory chats read and write; another name keeps a separate memory.",
  memory_recall_interval: "Recall on every n-th loop step (1, n+1, 2n+1, ...).",
  memory_recall_similarity_threshold: "Lowest relevance (0 to 1) of a recalled memory.",
  memory_memorize_replace_threshold: "Relevance (0 to 1) a stored memory needs to be replaced.",
  mcp_server_token: "Token of the external API (header X-API-KEY); stored in usr/.env.",
  code_exec_first_output_timeout: "Seconds to wait for a command's first output.",
  code_exec_between_output_timeout: "Seconds of silence before the tool returns what it has.",
  code_exec_max_timeout: "Seconds after which the tool returns whatever output there is.",
  code_exec_ssh_enabled: "Run commands on another host over SSH instead of on this machine.",
  code_exec_ssh_addr: "The SSH host's name or address.",
  code_exec_ssh_port: "The SSH host's port.",
  code_exec_ssh_user: "The user commands run as on the SSH host.",
  code_exec_ssh_pass: "The SSH password (empty: log in with the key file); stored in usr/.env.",
  code_exec_ssh_key_file: "Private key file for the SSH login (a path, relative to usr/ or absolute).",
  recovery_recheck_seconds: "Seconds between two checks of held runs whose receipt may now prove the outcome.",
  retention_runs: "The newest finished runs the journal keeps.",
  retention_days: "Finished runs older than this many days may be removed.",
  mcp_servers: 'MCP servers as JSON, Agent Zero\'s format: {"mcpServers": {"name": {"command", "args", "env"} or {"url", "headers", "type"}}} (docs/mcp.md).',
  mcp_client_init_timeout: "Seconds an MCP server may take to start and list its tools.",
  mcp_client_tool_timeout: "Seconds one MCP tool call may take.",
  searxng_url: "The SearXNG instance the search_engine tool asks (JSON format enabled).",
  document_query_allow_private_addresses: "Let document_query fetch URLs on loopback, link-local and private addresses (off: public addresses only).",
  document_query_max_bytes: "Largest document document_query reads or downloads, in bytes.",
  document_query_timeout: "Seconds one URL download may take.",
  browser_model_name: "The browser agent's model; empty: the chat model (provider and all).",
  browser_model_vision: "Send the browser model a screenshot of the page with each step.",
  browser_allow_private_addresses: "Let browser_agent open loopback and private network addresses.",
  browser_action_timeout: "Seconds one browser action may take; a browser that hangs longer is killed.",
  browser_task_timeout: "Seconds one browser_agent task may run (checked between steps).",
  browser_max_steps: "Most steps (model reply and action) of one browser_agent task.",
};

let view = null; // the last settings view from the server
let reportError = () => {};

function helpFor(name) {
  if (HELP[name]) return HELP[name];
  const suffix = name.replace(/^(chat_model|util_model|embed_model|browser_model)_/, "");
  return suffix !== name ? HELP[suffix] || "" : "";
}

function groupOf(name) {
  const found = GROUPS.find(([prefix]) => name.startsWith(prefix));
  return found ? found[1] : "Other";
}

const LABELS = {
  provider: "Provider", name: "Model name", api_base: "API base URL",
  ctx_length: "Context window (tokens)", ctx_history: "History share of the window",
  ctx_input: "Input share of the window",
  kwargs: "Extra request parameters (JSON)", rl_requests: "Rate limit: requests per minute",
  rl_input: "Rate limit: input tokens per minute", rl_output: "Rate limit: output tokens per minute",
  mcp_server_token: "External API token", agent_profile: "Agent profile",
  chat_model_vision: "Vision (images to the model)",
  mcp_servers: "MCP servers", searxng_url: "SearXNG URL",
  code_exec_ssh_enabled: "Run commands over SSH", code_exec_ssh_addr: "SSH host",
  code_exec_ssh_port: "SSH port", code_exec_ssh_user: "SSH user",
  code_exec_ssh_pass: "SSH password", code_exec_ssh_key_file: "SSH key file",
};

function humanName(name) {
  const short = name.replace(/^(chat_model|util_model|embed_model|browser_model|code_exec|retention)_/, "");
  if (LABELS[name] || LABELS[short]) return LABELS[name] || LABELS[short];
  const text = short.replace(/_/g, " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function displayValue(value, type) {
  if (type === "object") return JSON.stringify(value ?? {}, null, 1);
  return value === null || value === undefined ? "" : String(value);
}

function providerSelect(name, value) {
  const select = document.createElement("select");
  const ids = [...view.providers];
  if (value && !ids.includes(value)) ids.push(value);
  for (const id of ids) {
    const option = document.createElement("option");
    option.value = id;
    option.textContent = id;
    select.append(option);
  }
  select.value = value || "";
  return select;
}

function makeInput(name, field, value) {
  let input;
  if (name.endsWith("_provider")) input = providerSelect(name, value);
  else if (field.type === "boolean") {
    input = document.createElement("input");
    input.type = "checkbox";
    input.checked = Boolean(value);
  } else if (field.type === "object" || name === "mcp_servers") {
    input = document.createElement("textarea");
    input.rows = name === "mcp_servers" ? 6 : 2;
    input.value = displayValue(value, field.type);
  } else {
    input = document.createElement("input");
    if (field.secret) {
      input.type = "password";
      input.autocomplete = "off";
      input.placeholder = view.secrets[name] ? "set - type to replace" : "not set";
    } else {
      input.value = displayValue(value, field.type);
      if (field.type === "integer") input.inputMode = "numeric";
      if (field.type === "number") input.inputMode = "decimal";
      if (name.endsWith("_api_base")) input.placeholder = "(provider default)";
    }
  }
  input.name = name;
  input.setAttribute("data-testid", name);
  input.dataset.type = field.type;
  return input;
}

function fieldRow(name, field) {
  const value = field.secret ? "" : view.settings[name];
  const label = document.createElement("label");
  label.className = "setting";
  const title = document.createElement("span");
  title.className = "setting-name";
  title.textContent = humanName(name);
  const code = document.createElement("code");
  code.textContent = name;
  title.append(" ", code);
  const input = makeInput(name, field, value);
  const fromEnv = (view.env_defaults || []).includes(name);
  const help = document.createElement("span");
  help.className = "key-state";
  help.textContent = helpFor(name) + (fromEnv ? ` Default from A0_SET_${name}; a value saved here wins.` : "");
  help.setAttribute("data-testid", `help-${name}`);
  const error = document.createElement("span");
  error.className = "field-error";
  error.hidden = true;
  error.setAttribute("data-testid", `error-${name}`);
  label.append(title, input, help, error);
  return label;
}

function renderFields() {
  const groups = new Map([...GROUPS.map(([, title]) => [title, []]), ["Other", []]]);
  for (const [name, field] of Object.entries(view.fields)) groups.get(groupOf(name)).push(fieldRow(name, field));
  const sets = [];
  for (const [title, rows] of groups) {
    if (!rows.length) continue;
    const set = document.createElement("fieldset");
    const legend = document.createElement("legend");
    legend.textContent = title;
    set.append(legend, ...rows);
    sets.push(set);
  }
  document.getElementById("settings-fields").replaceChildren(...sets);
}

function renderKeys(apiKeys) {
  const rows = Object.entries(apiKeys).map(([provider, isSet]) => {
    const label = document.createElement("label");
    label.textContent = `${provider} `;
    const stateText = document.createElement("span");
    stateText.className = "key-state";
    stateText.textContent = isSet ? "(set)" : "(not set)";
    stateText.setAttribute("data-testid", `api-key-state-${provider}`);
    const input = document.createElement("input");
    input.type = "password";
    input.name = `api_key_${provider}`;
    input.autocomplete = "off";
    input.placeholder = isSet ? "set - type to replace" : "not set";
    input.setAttribute("data-testid", `api-key-${provider}`);
    const error = document.createElement("span");
    error.className = "field-error";
    error.hidden = true;
    error.setAttribute("data-testid", `error-api_key_${provider}`);
    label.append(stateText, input, error);
    return label;
  });
  document.getElementById("api-key-fields").replaceChildren(...rows);
}

function render(next) {
  view = next;
  renderFields();
  renderKeys(view.api_keys);
  showErrors({}, "");
  showDirty();
}

function showDirty() {
  const count = view ? Object.keys(changes()).length : 0;
  document.getElementById("settings-dirty").textContent = count
    ? `${count} unsaved change${count > 1 ? "s" : ""}` : "";
}

let asking = false;

// Cancel, Escape or closing with unsaved edits asks first; without edits it just closes.
async function requestClose() {
  if (asking) return;
  const count = Object.keys(changes()).length;
  if (count) {
    asking = true;
    const text = `You changed ${count} setting${count > 1 ? "s" : ""} without saving. ` +
      "Discard the change" + (count > 1 ? "s?" : "?");
    const discard = await confirmAction(text, "Discard changes", "Discard your edits?");
    asking = false;
    if (!discard) return;
  }
  dialog().close();
}

function showErrors(fields, message) {
  const f = form();
  for (const node of f.querySelectorAll(".field-error")) {
    node.hidden = true;
    node.textContent = "";
  }
  for (const node of f.querySelectorAll(".invalid")) node.classList.remove("invalid");
  let unplaced = message;
  for (const [name, text] of Object.entries(fields)) {
    const node = f.querySelector(`[data-testid="error-${CSS.escape(name)}"]`);
    if (!node) continue;
    node.textContent = text;
    node.hidden = false;
    f.elements[name]?.classList.add("invalid");
    unplaced = "";
  }
  const box = document.getElementById("settings-error");
  box.textContent = unplaced;
  box.hidden = !unplaced;
  const first = f.querySelector(".invalid");
  if (first) first.focus();
}

/** The fields whose value differs from what the server sent (secrets: when typed in). */
function changes() {
  const out = {};
  for (const input of form().querySelectorAll("input, select, textarea")) {
    const name = input.name;
    if (!name || input.disabled) continue;
    if (input.type === "password") {
      if (input.value) out[name] = input.value;
      continue;
    }
    const field = view.fields[name];
    if (!field) continue;
    if (field.type === "boolean") {
      if (input.checked !== Boolean(view.settings[name])) out[name] = input.checked;
    } else if (input.value !== displayValue(view.settings[name], field.type)) {
      out[name] = input.value;
    }
  }
  return out;
}

export async function openSettings() {
  try {
    render(await callApi("settings_get", {}));
    dialog().showModal();
  } catch (error) {
    reportError(error);
  }
}

async function save() {
  const settings = changes();
  if (!Object.keys(settings).length) {
    dialog().close();
    return;
  }
  try {
    render(await callApi("settings_set", { settings }));
    dialog().close();
  } catch (error) {
    const fields = error.details?.fields || (error.details?.field ? { [error.details.field]: error.message } : {});
    showErrors(fields, `${error.message} (${error.code || "error"})`);
  }
}

export function initSettings(onError) {
  reportError = onError;
  document.getElementById("settings-save").addEventListener("click", save);
  document.getElementById("settings-cancel").addEventListener("click", requestClose);
  form().addEventListener("input", showDirty);
  form().addEventListener("change", showDirty);
  dialog().addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault(); // the browser would close the dialog and drop the edits
    requestClose();
  });
  dialog().addEventListener("cancel", (event) => {
    event.preventDefault();
    requestClose();
  });
}
