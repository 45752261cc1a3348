// The work-folder browser: list a folder, go in and up, upload, download, edit a text
// file, rename, delete.

import { callApi, callApiRaw, errorText } from "./api.js";
import { noticeLine, requestOrder } from "./dom.js";
import { confirmAction } from "./confirm.js";

const $ = (id) => document.getElementById(id);
const state = { context: null, path: "", parent: null, editing: null, original: "" };

const notice = noticeLine("files-message");


function sizeText(entry) {
  if (entry.type !== "file") return "";
  const units = ["B", "KiB", "MiB", "GiB"];
  let size = entry.size;
  let unit = 0;
  while (size >= 1024 && unit < units.length - 1) {
    size /= 1024;
    unit += 1;
  }
  return `${unit ? size.toFixed(1) : size} ${units[unit]}`;
}

function button(text, testid, onClick, className = "") {
  const node = document.createElement("button");
  node.type = "button";
  node.textContent = text;
  node.className = className;
  node.setAttribute("data-testid", testid);
  node.addEventListener("click", onClick);
  return node;
}

function row(entry) {
  const tr = document.createElement("tr");
  tr.setAttribute("data-testid", "files-entry");
  tr.dataset.name = entry.name;
  tr.dataset.type = entry.type;
  const name = document.createElement("td");
  if (entry.type === "dir") {
    const link = button(`${entry.name}/`, "files-open-dir", () => load(entry.path), "link");
    name.append(link);
  } else {
    name.textContent = entry.name;
    if (entry.outside) name.append(" (link outside the folder)");
  }
  const size = document.createElement("td");
  size.textContent = sizeText(entry);
  const modified = document.createElement("td");
  modified.textContent = new Date(entry.modified * 1000).toLocaleString();
  const actions = document.createElement("td");
  actions.className = "actions";
  if (entry.type === "file") {
    actions.append(button("Download", "files-download", () => download(entry)));
    actions.append(button("Edit", "files-edit", () => edit(entry)));
  }
  actions.append(button("Rename", "files-rename", () => startRename(entry, name)));
  actions.append(button("Delete", "files-delete", () => remove(entry), "danger"));
  tr.append(name, size, modified, actions);
  return tr;
}

function show(listing) {
  state.path = listing.path;
  state.parent = listing.parent;
  $("files-root").textContent = listing.root;
  $("files-path").textContent = `/${listing.path}`;
  $("files-up").disabled = listing.parent === null;
  const rows = listing.entries.map(row);
  if (!rows.length) {
    const empty = document.createElement("tr");
    empty.innerHTML = '<td colspan="4" class="muted" data-testid="files-empty">This folder is empty.</td>';
    rows.push(empty);
  }
  $("files-list").replaceChildren(...rows);
}

// Only the newest listing request draws the list: an older answer (a Refresh sent before
// a rename) arriving late must not replace the newer one. Errors reach the caller as before.
const listings = requestOrder();
async function listed(name, body) {
  const turn = listings.next();
  const result = await callApi(name, body);
  if (listings.newest(turn)) show(result);
  return result;
}

function payload(extra = {}) {
  return state.context ? { context: state.context, ...extra } : extra;
}

async function load(path = state.path) {
  try {
    await listed("get_work_dir_files", payload({ path }));
  } catch (error) {
    notice(errorText(error));
  }
}

async function upload() {
  const input = $("files-upload");
  if (!input.files.length) return;
  const form = new FormData();
  form.append("path", state.path);
  if (state.context) form.append("context", state.context);
  for (const file of input.files) form.append("files", file);
  try {
    const result = await listed("upload_work_dir_files", form);
    notice(`Uploaded ${result.uploaded.map((u) => u.name).join(", ")}.`);
  } catch (error) {
    notice(errorText(error));
  }
  input.value = "";
}

async function download(entry) {
  try {
    const response = await callApiRaw("download_work_dir_file", payload({ path: entry.path }));
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = entry.name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    notice(errorText(error));
  }
}

// rename: the name cell becomes a field; Enter or "Save name" renames, Escape keeps it
function startRename(entry, cell) {
  const field = document.createElement("input");
  field.className = "rename";
  field.value = entry.name;
  field.setAttribute("data-testid", "files-rename-input");
  field.setAttribute("aria-label", `New name for ${entry.name}`);
  const save = button("Save name", "files-rename-save", () => rename(entry, field.value.trim()));
  const cancel = button("Cancel", "files-rename-cancel", () => load());
  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter") save.click();
    if (event.key === "Escape") {
      event.preventDefault(); // keep the dialog open: only the rename is cancelled
      cancel.click();
    }
  });
  cell.replaceChildren(field, " ", save, " ", cancel);
  field.focus();
  field.select();
}

async function rename(entry, newName) {
  if (!newName || newName === entry.name) return load();
  try {
    await listed("rename_work_dir_file", payload({ path: entry.path, newName }));
    notice(`Renamed ${entry.name} to ${newName}.`);
  } catch (error) {
    notice(errorText(error));
  }
}

// edit: a text file in its own dialog; Cancel with changes asks first
async function edit(entry) {
  try {
    const file = await callApi("edit_work_dir_file", payload({ path: entry.path }));
    state.editing = entry;
    state.original = file.content;
    $("file-edit-path").textContent = file.path;
    $("file-edit-text").value = file.content;
    $("file-edit-dialog").showModal();
    $("file-edit-text").focus();
  } catch (error) {
    notice(errorText(error));
  }
}

async function saveEdit() {
  const entry = state.editing;
  if (!entry) return;
  try {
    const content = $("file-edit-text").value;
    await listed("edit_work_dir_file", payload({ path: entry.path, content }));
    state.editing = null;
    $("file-edit-dialog").close();
    notice(`Saved ${entry.name}.`);
  } catch (error) {
    notice(errorText(error));
    $("file-edit-dialog").close();
  }
}

async function cancelEdit(event) {
  if (event) event.preventDefault();
  const entry = state.editing;
  const changed = entry && $("file-edit-text").value !== state.original;
  if (changed && !(await confirmAction(`Discard your changes to ${entry.name}?`, "Discard", "Unsaved changes"))) {
    return;
  }
  state.editing = null;
  $("file-edit-dialog").close();
}

async function remove(entry) {
  const what = entry.type === "dir" ? `the folder ${entry.name} and everything in it` : entry.name;
  if (!window.confirm(`Delete ${what}?`)) return;
  try {
    await listed("delete_work_dir_file", payload({ path: entry.path }));
    notice(`Deleted ${entry.name}.`);
  } catch (error) {
    notice(errorText(error));
  }
}

export function openFiles(context) {
  state.context = context || null;
  state.path = "";
  notice("");
  $("files-dialog").showModal();
  load("");
}

export function initFiles(currentContext) {
  $("files-open").addEventListener("click", () => openFiles(currentContext()));
  $("files-up").addEventListener("click", () => state.parent !== null && load(state.parent));
  $("files-refresh").addEventListener("click", () => {
    notice(""); // a notice is about what happened before: Refresh starts from the folder as it is
    load();
  });
  $("files-upload").addEventListener("change", upload);
  $("files-close").addEventListener("click", () => $("files-dialog").close());
  $("file-edit-save").addEventListener("click", saveEdit);
  $("file-edit-cancel").addEventListener("click", () => cancelEdit());
  $("file-edit-dialog").addEventListener("cancel", cancelEdit); // Escape asks like Cancel
}
