// The Memory view over memory_dashboard and memory_status: search (by meaning, or the
// newest first), filter by memory subdir and area, edit a memory's text and area, delete
// with confirmation, the source file of each knowledge chunk, and the progress of
// knowledge import and re-embedding.

import { callApi, errorText } from "./api.js";
import { el, noticeLine, requestOrder } from "./dom.js";
import { confirmAction } from "./confirm.js";

const $ = (id) => document.getElementById(id);
const AREAS = ["main", "fragments", "solutions"];
const state = { memories: [], editing: null, timer: null };
const loads = requestOrder();

const notice = noticeLine("memory-message");


function statusText(status) {
  const parts = [`search: ${status.search_backend}`];
  if (status.search_problem) parts.push(`(${status.search_problem})`);
  parts.push(`model: ${status.embedding_model || "-"}`);
  const reembed = status.reembed || {};
  if (reembed.state === "running") {
    parts.push(`re-embedding ${reembed.done}/${reembed.total}: search still uses the old vectors of ${status.search_model}`);
  } else if (reembed.state === "failed") {
    parts.push(`re-embedding failed (${reembed.error}): search uses the old vectors of ${status.search_model}`);
  }
  const knowledge = status.knowledge || {};
  if (knowledge.state === "scanning" || knowledge.state === "importing") {
    parts.push(`importing knowledge ${knowledge.files_done}/${knowledge.files_total} ${knowledge.current || ""}`);
  } else if (knowledge.state === "done") {
    const errors = (knowledge.errors || []).length;
    parts.push(`knowledge: ${knowledge.imported} imported, ${knowledge.unchanged} unchanged, ${knowledge.removed} removed` +
      (errors ? `, ${errors} not imported` : ""));
  } else if (knowledge.state === "failed") {
    parts.push(`knowledge import failed: ${knowledge.error}`);
  }
  return parts.join(" · ");
}

async function refreshStatus() {
  try {
    const status = await callApi("memory_status", {});
    $("memory-status").textContent = statusText(status);
  } catch (error) {
    $("memory-status").textContent = errorText(error);
  }
}

function source(memory) {
  if (!memory.knowledge_source) return el("span", { className: "sub", text: "conversation" });
  return el("code", { text: memory.source_path || memory.source_file, testid: "memory-source" });
}

function row(memory) {
  const edit = el("button", { type: "button", text: "Edit", testid: "memory-edit" });
  edit.addEventListener("click", () => openEdit(memory));
  const remove = el("button", { type: "button", text: "Delete", className: "danger", testid: "memory-delete" });
  remove.addEventListener("click", () => removeMemory(memory));
  const text = memory.content_full.length > 300 ? `${memory.content_full.slice(0, 300)}…` : memory.content_full;
  const score = memory.score !== undefined ? el("div", { className: "sub", text: `relevance ${memory.score}` }) : null;
  return el("tr", { testid: "memory-row" },
    el("td", { text: memory.area, testid: "memory-area-cell" }),
    el("td", {}, el("div", { className: "memory-text", text, testid: "memory-text" }), score),
    el("td", {}, source(memory)),
    el("td", { className: "sub", text: memory.timestamp }),
    el("td", { className: "actions" }, edit, remove));
}

async function loadSubdirs() {
  const select = $("memory-subdir");
  const chosen = select.value;
  const [{ subdirs }, { memory_subdir }] = await Promise.all([
    callApi("memory_dashboard", { action: "get_memory_subdirs" }),
    callApi("memory_dashboard", { action: "get_current_memory_subdir" }),
  ]);
  select.replaceChildren(...subdirs.map((name) => el("option", { value: name, text: name })));
  select.value = subdirs.includes(chosen) ? chosen : memory_subdir;
}

async function refresh() {
  const body = {
    action: "search",
    memory_subdir: $("memory-subdir").value || undefined,
    area: $("memory-area").value,
    search: $("memory-search").value.trim(),
    limit: 200,
  };
  // Only the newest request draws the list: an older answer (a search sent before the
  // area changed) arriving late must not replace it.
  const turn = loads.next();
  const list = $("memory-list");
  list.setAttribute("aria-busy", "true");
  try {
    const result = await callApi("memory_dashboard", body);
    if (!loads.newest(turn)) return;
    state.memories = result.memories;
    if (!result.memories.length) {
      list.replaceChildren(el("tr", {}, el("td", { colSpan: 5, className: "muted", text: body.search ? "Nothing matches." : "No memories yet." })));
    } else {
      list.replaceChildren(...result.memories.map(row));
    }
    $("memory-counts").textContent = `${result.total_db_count} memories in "${result.memory_subdir}" ` +
      `(${result.knowledge_count} from knowledge files, ${result.conversation_count} from conversations)`;
  } catch (error) {
    if (!loads.newest(turn)) return;
    notice(errorText(error));
  } finally {
    if (loads.newest(turn)) list.removeAttribute("aria-busy");
  }
  refreshStatus();
}

function openEdit(memory) {
  state.editing = memory;
  $("memory-edit-text").value = memory.content_full;
  $("memory-edit-area").value = memory.area;
  $("memory-edit-id").textContent = memory.id;
  $("memory-edit-form").hidden = false;
  $("memory-edit-text").focus();
}

function closeEdit() {
  state.editing = null;
  $("memory-edit-form").hidden = true;
}

async function saveEdit(event) {
  event.preventDefault();
  const memory = state.editing;
  if (!memory) return;
  const metadata = { ...memory.metadata, area: $("memory-edit-area").value };
  try {
    await callApi("memory_dashboard", {
      action: "update",
      memory_subdir: memory.subdir,
      original: { id: memory.id },
      edited: { content_full: $("memory-edit-text").value, metadata },
    });
    notice(`Memory ${memory.id} saved.`);
    closeEdit();
  } catch (error) {
    notice(errorText(error));
  }
  await refresh();
}

async function removeMemory(memory) {
  const what = memory.knowledge_source
    ? `This chunk of ${memory.source_file} is deleted from memory (the file stays; a reindex after the file changes brings its chunks back).`
    : "This memory is deleted for good.";
  if (!(await confirmAction(what, "Delete", "Delete this memory?"))) return;
  try {
    const result = await callApi("memory_dashboard", { action: "delete", memory_subdir: memory.subdir, memory_id: memory.id });
    notice(result.deleted ? `Memory ${memory.id} deleted.` : `Memory ${memory.id} was already gone.`);
  } catch (error) {
    notice(errorText(error));
  }
  await refresh();
}

async function reindex() {
  notice("Importing the knowledge folders…");
  try {
    const result = await callApi("knowledge_reindex", {});
    notice(result.message);
  } catch (error) {
    notice(errorText(error));
  }
  await refresh();
}

export async function openMemory() {
  notice("");
  closeEdit();
  $("memory-dialog").showModal();
  try {
    await loadSubdirs();
  } catch (error) {
    notice(errorText(error));
  }
  await refresh();
  clearInterval(state.timer);
  state.timer = setInterval(() => {
    if ($("memory-dialog").open) refreshStatus();
    else clearInterval(state.timer);
  }, 2000);
}

export function initMemory() {
  $("memory-area").replaceChildren(
    el("option", { value: "", text: "all areas" }),
    ...AREAS.map((area) => el("option", { value: area, text: area })),
  );
  $("memory-edit-area").replaceChildren(...AREAS.map((area) => el("option", { value: area, text: area })));
  $("memory-open").addEventListener("click", openMemory);
  $("memory-close").addEventListener("click", () => $("memory-dialog").close());
  $("memory-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    notice("");
    refresh();
  });
  $("memory-area").addEventListener("change", refresh);
  $("memory-subdir").addEventListener("change", refresh);
  $("memory-reindex").addEventListener("click", reindex);
  $("memory-edit-cancel").addEventListener("click", closeEdit);
  $("memory-edit-form").addEventListener("submit", saveEdit);
}
