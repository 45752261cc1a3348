// The chat UI: chat list, log view fed by /api/poll, send box, controls and settings.

import { ApiCallError, callApi } from "./api.js";
import { renderItem } from "./render.js";
import { openSettings, initSettings } from "./settings.js";
import { initRecovery, showHeld } from "./recovery.js";
import { initFiles } from "./files.js";
import { initPlan } from "./plan.js";
import { initTasks } from "./tasks.js";

const state = {
  context: localStorage.getItem("a0.context") || null,
  logGuid: "",
  logVersion: 0,
  running: false,
  paused: false,
  pollTimer: null,
};

const $ = (id) => document.getElementById(id);
const messages = $("messages");

function showError(error) {
  const banner = $("error-banner");
  if (!error) {
    banner.hidden = true;
    return;
  }
  banner.textContent = error instanceof ApiCallError ? `${error.message} (${error.code})` : String(error);
  banner.hidden = false;
}

function selectChat(ctxid) {
  state.context = ctxid;
  if (ctxid) localStorage.setItem("a0.context", ctxid);
  else localStorage.removeItem("a0.context");
  state.logGuid = "";
  state.logVersion = 0;
  messages.replaceChildren();
  schedulePoll(0);
}

function renderChatList(contexts) {
  const list = $("chat-list");
  const rows = contexts.map((ctx) => {
    const li = document.createElement("li");
    li.dataset.ctxid = ctx.id;
    li.setAttribute("data-testid", "chat-item");
    if (ctx.id === state.context) li.classList.add("selected");
    if (ctx.running) li.classList.add("running");
    const dot = document.createElement("span");
    dot.className = "dot";
    const name = document.createElement("span");
    name.textContent = ctx.name || `Chat ${ctx.no ?? ctx.id}`;
    li.append(dot, name);
    li.addEventListener("click", () => selectChat(ctx.id));
    return li;
  });
  list.replaceChildren(...rows);
  const current = contexts.find((c) => c.id === state.context);
  $("chat-title").textContent = current ? current.name || `Chat ${current.no ?? current.id}` : "No chat selected";
}

// Returns false when the log was replaced (a new guid: a reset, or a run resumed from the
// journal) and the snapshot holds only changes since a version of the old log: the caller
// asks again from version 0.
function applyLogs(snapshot, from) {
  if (snapshot.log_guid !== state.logGuid) {
    messages.replaceChildren();
    state.logGuid = snapshot.log_guid;
    if (from > 0) {
      state.logVersion = 0;
      return false;
    }
  }
  const atBottom = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 40;
  snapshot.logs.forEach((item, index) => {
    const no = item.no ?? index;
    let node = messages.querySelector(`[data-no="${no}"]`);
    if (!node) {
      node = document.createElement("div");
      node.dataset.no = String(no);
      messages.append(node);
    }
    renderItem(node, { ...item, no });
  });
  state.logVersion = snapshot.log_version;
  if (atBottom) messages.scrollTop = messages.scrollHeight;
  return true;
}

function applyControls() {
  const has = Boolean(state.context);
  for (const id of ["pause-chat", "nudge-chat", "reset-chat", "remove-chat", "plan-open"]) $(id).disabled = !has;
  $("stop-chat").disabled = !has || !state.running;
  $("pause-chat").textContent = state.paused ? "Resume" : "Pause";
  const status = $("chat-status");
  const label = state.paused ? "paused" : state.running ? "running" : "idle";
  status.textContent = label;
  status.className = `status ${label}`;
}

async function poll() {
  let delay = null;
  try {
    const from = state.logVersion;
    const snapshot = await callApi("poll", { context: state.context, log_from: from });
    if (snapshot.deselect_chat) {
      selectChat(null);
      return;
    }
    renderChatList(snapshot.contexts);
    if (snapshot.context && !applyLogs(snapshot, from)) {
      delay = 0; // the log was replaced: fetch it whole
      return;
    }
    $("chat-progress").textContent = snapshot.log_progress_active ? snapshot.log_progress : "";
    state.running = Boolean(snapshot.running);
    state.paused = Boolean(snapshot.paused);
    showHeld(snapshot);
    applyControls();
    showError(null);
  } catch (error) {
    showError(error);
  } finally {
    schedulePoll(delay ?? (state.running ? 100 : 250));
  }
}

function schedulePoll(delay) {
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(poll, delay);
}

async function act(fn) {
  try {
    await fn();
    showError(null);
  } catch (error) {
    showError(error);
  }
  schedulePoll(0);
}

async function sendMessage(event) {
  event.preventDefault();
  const input = $("send-input");
  const files = $("attach-input").files;
  const text = input.value.trim();
  if (!text && !files.length) return;
  let payload = { text, context: state.context || "" };
  if (files.length) {
    payload = new FormData();
    payload.append("text", text);
    payload.append("context", state.context || "");
    for (const file of files) payload.append("attachments", file);
  }
  await act(async () => {
    const result = await callApi("message_async", payload);
    input.value = "";
    $("attach-input").value = "";
    $("attach-count").textContent = "";
    if (result.context !== state.context) selectChat(result.context);
  });
}

function init() {
  $("send-form").addEventListener("submit", sendMessage);
  $("send-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) sendMessage(event);
  });
  $("new-chat").addEventListener("click", () =>
    act(async () => selectChat((await callApi("chat_create", {})).ctxid)),
  );
  $("reset-chat").addEventListener("click", () =>
    act(async () => {
      await callApi("chat_reset", { context: state.context });
      selectChat(state.context);
    }),
  );
  $("remove-chat").addEventListener("click", () =>
    act(async () => {
      await callApi("chat_remove", { context: state.context });
      selectChat(null);
    }),
  );
  $("pause-chat").addEventListener("click", () =>
    act(() => callApi("pause", { context: state.context, paused: !state.paused })),
  );
  $("nudge-chat").addEventListener("click", () => act(() => callApi("nudge", { ctxid: state.context })));
  $("stop-chat").addEventListener("click", () => act(() => callApi("chat_stop", { context: state.context })));
  $("settings-open").addEventListener("click", openSettings);
  $("attach-input").addEventListener("change", () => {
    const count = $("attach-input").files.length;
    $("attach-count").textContent = count ? `${count} file${count > 1 ? "s" : ""}` : "";
  });
  initSettings(showError);
  initRecovery();
  initFiles(() => state.context);
  initPlan(() => state.context);
  initTasks(selectChat);
  schedulePoll(0);
}

init();
