// The settings dialog: models and keys. Keys are write-only: the UI only learns "set" or "not set".

import { callApi } from "./api.js";

const dialog = () => document.getElementById("settings-dialog");
const form = () => document.getElementById("settings-form");
const FIELDS = [
  "chat_model_provider", "chat_model_name", "chat_model_api_base",
  "util_model_provider", "util_model_name", "util_model_api_base",
];

function fillProviders(select, providers, value) {
  const options = providers.map((p) => {
    const option = document.createElement("option");
    option.value = p;
    option.textContent = p;
    return option;
  });
  if (value && !providers.includes(value)) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    options.push(option);
  }
  select.replaceChildren(...options);
  select.value = value || "";
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
    label.append(stateText, input);
    return label;
  });
  document.getElementById("api-key-fields").replaceChildren(...rows);
}

function render(view) {
  const f = form();
  for (const name of FIELDS) {
    const field = f.elements[name];
    const value = view.settings[name] ?? "";
    if (field.tagName === "SELECT") fillProviders(field, view.providers, value);
    else field.value = value;
  }
  const token = f.elements.mcp_server_token;
  token.value = "";
  token.placeholder = view.secrets.mcp_server_token ? "set - type to replace" : "not set";
  renderKeys(view.api_keys);
}

let reportError = () => {};

export async function openSettings() {
  try {
    render(await callApi("settings_get", {}));
    document.getElementById("settings-error").hidden = true;
    dialog().showModal();
  } catch (error) {
    reportError(error);
  }
}

async function save() {
  const f = form();
  const settings = {};
  for (const name of FIELDS) settings[name] = f.elements[name].value;
  for (const input of f.querySelectorAll("input[type=password]")) {
    if (input.value) settings[input.name] = input.value;
  }
  try {
    render(await callApi("settings_set", { settings }));
    dialog().close();
  } catch (error) {
    const box = document.getElementById("settings-error");
    box.textContent = `${error.message} (${error.code || "error"})`;
    box.hidden = false;
  }
}

export function initSettings(onError) {
  reportError = onError;
  document.getElementById("settings-save").addEventListener("click", save);
  document.getElementById("settings-cancel").addEventListener("click", () => dialog().close());
}
