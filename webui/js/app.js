// The chat UI: chat list, log view fed by /api/poll, send box, controls and settings.

import { ApiCallError, callApi } from "./api.js";
import { renderItem } from "./render.js";
import { openSettings, initSettings } from "./settings.js";
import { initRecovery, showHeld } from "./recovery.js";
import { initFiles } from "./files.js";
import { initPlan } from "./plan.js";
import { initMemory } from "./memory.js";
import { initTasks } from "./tasks.js";
import { applyNotifications, initNotifications, notificationsFrom, notifyError } from "./notifications.js";
import { confirmAction } from "./confirm.js";
import { requestOrder } from "./dom.js";
import * as attachments from "./attachments.js";
import { initChatTransfer } from "./chat_transfer.js";

const state = {
  context: localStorage.getItem("a0.context") || null,
  logGuid: "",
  logVersion: 0,
  running: false,
  paused: false,
  pollTimer: null,
};

const $ = (id) => document.getElementById(id);
const polls = requestOrder(); // only the newest poll draws (see poll)
const messages = $("messages");

// The banner says only whether the server answers the poll; a failed action is a
// notification that stays (notifyError), so the next successful poll cannot hide it.
function showConnection(error) {
  const banner = $("error-banner");
  if (!error) {
    banner.hidden = true;
    return;
  }
  const text = error instanceof ApiCallError ? `${error.message} (${error.code})` : String(error);
  banner.textContent = `The server does not answer the update: ${text}. Retrying...`;
  banner.hidden = false;
}

function chatName(ctx) {
  return ctx.name || `Chat ${ctx.no ?? ctx.id}`;
}

function selectChat(ctxid) {
  state.context = ctxid;
  if (ctxid) localStorage.setItem("a0.context", ctxid);
  else localStorage.removeItem("a0.context");
  state.logGuid = "";
  state.logVersion = 0;
  messages.replaceChildren();
  polls.next(); // a poll still out asked for the chat shown before
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
    name.textContent = chatName(ctx);
    li.append(dot, name);
    if (ctx.held) {
      li.classList.add("held");
      const mark = document.createElement("span");
      mark.className = "held-mark";
      mark.textContent = "held";
      mark.title = `Its run waits for a decision (${ctx.held_reason || "see Recovery"})`;
      mark.setAttribute("data-testid", "chat-held");
      li.append(mark);
    }
    li.addEventListener("click", () => selectChat(ctx.id));
    return li;
  });
  list.replaceChildren(...rows);
  const current = contexts.find((c) => c.id === state.context);
  $("chat-title").textContent = current ? chatName(current) : "No chat selected";
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
    renderItem(node, { ...item, no, context: state.context });
  });
  state.logVersion = snapshot.log_version;
  if (atBottom) messages.scrollTop = messages.scrollHeight;
  return true;
}

function applyControls() {
  const has = Boolean(state.context);
  for (const id of ["pause-chat", "nudge-chat", "reset-chat", "remove-chat", "plan-open", "export-chat"]) $(id).disabled = !has;
  $("stop-chat").disabled = !has || !state.running;
  $("pause-chat").textContent = state.paused ? "Resume" : "Pause";
  const status = $("chat-status");
  const label = state.paused ? "paused" : state.running ? "running" : "idle";
  status.textContent = label;
  status.className = `status ${label}`;
}

// Only the answer to the newest poll draws: a poll sent before a chat switch or an action
// may answer after it, with the state from before; the poll sent after it draws instead,
// and the loop goes on from there.
async function poll() {
  const turn = polls.next();
  let delay = null;
  try {
    const from = state.logVersion;
    const snapshot = await callApi("poll", {
      context: state.context, log_from: from, notifications_from: notificationsFrom(),
    });
    if (!polls.newest(turn)) return;
    applyNotifications(snapshot);
    if (snapshot.deselect_chat) {
      selectChat(null);
      return;
    }
    renderChatList(snapshot.contexts);
    if (snapshot.context && !applyLogs(snapshot, from)) {
      delay = 0; // the log was replaced: fetch it whole
      return;
    }
    state.running = Boolean(snapshot.running);
    // an idle chat shows no step in progress (its last heading is history, not a status)
    $("chat-progress").textContent = state.running && snapshot.log_progress_active ? snapshot.log_progress : "";
    state.paused = Boolean(snapshot.paused);
    showHeld(snapshot);
    showModelProblem(snapshot.model_problem);
    applyControls();
    showConnection(null);
  } catch (error) {
    if (polls.newest(turn)) showConnection(error);
  } finally {
    if (polls.newest(turn)) schedulePoll(delay ?? (state.running ? 100 : 250));
  }
}

// The page says at the top when no model can answer (no key, unknown provider, a malformed
// base URL), before anything is sent; the poll reads it from the settings.
function showModelProblem(problem) {
  const banner = $("model-banner");
  banner.hidden = !problem;
  $("model-problem").textContent = problem ? problem.message : "";
}

function schedulePoll(delay) {
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(poll, delay);
}

async function act(fn) {
  try {
    await fn();
  } catch (error) {
    notifyError(error);
  }
  polls.next(); // a poll still out may show the state from before the action
  schedulePoll(0);
}

function currentName() {
  return $("chat-title").textContent || "this chat";
}

// #chat=<id> selects that chat (the Recovery panel's and other links use it)
function followHash() {
  const match = /^#chat=(.+)$/.exec(location.hash);
  if (!match) return;
  history.replaceState(null, "", location.pathname + location.search); // the same link works again
  selectChat(decodeURIComponent(match[1]));
}

async function sendMessage(event) {
  event.preventDefault();
  const input = $("send-input");
  const files = attachments.files();
  const text = input.value.trim();
  if (!text && !files.length) return;
  let payload = { text, context: state.context || "" };
  if (files.length) {
    payload = new FormData();
    payload.append("text", text);
    payload.append("context", state.context || "");
    for (const file of files) payload.append("attachments", file, file.name);
  }
  await act(async () => {
    const result = await callApi("message_async", payload);
    input.value = "";
    attachments.clear();
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
  $("reset-chat").addEventListener("click", async () => {
    const text = `Reset "${currentName()}"? Its messages disappear from the view and the agent ` +
      "starts over with an empty history. Past runs stay in the journal.";
    if (!(await confirmAction(text, "Reset", "Reset this chat?"))) return;
    act(async () => {
      await callApi("chat_reset", { context: state.context });
      selectChat(state.context);
    });
  });
  $("remove-chat").addEventListener("click", async () => {
    const text = `Delete "${currentName()}"? The chat is stopped and removed from the list; ` +
      "this cannot be undone from the UI.";
    if (!(await confirmAction(text, "Delete chat", "Delete this chat?"))) return;
    act(async () => {
      await callApi("chat_remove", { context: state.context });
      selectChat(null);
    });
  });
  $("pause-chat").addEventListener("click", () =>
    act(() => callApi("pause", { context: state.context, paused: !state.paused })),
  );
  $("nudge-chat").addEventListener("click", () => act(() => callApi("nudge", { ctxid: state.context })));
  $("stop-chat").addEventListener("click", () => act(() => callApi("chat_stop", { context: state.context })));
  $("settings-open").addEventListener("click", openSettings);
  attachments.init();
  $("model-settings").addEventListener("click", openSettings);
  document.addEventListener("open-settings", openSettings);
  initSettings(notifyError);
  initNotifications();
  initRecovery();
  initFiles(() => state.context);
  initPlan(() => state.context);
  initTasks(selectChat);
  initMemory();
  initChatTransfer(() => state.context, selectChat, act);
  window.addEventListener("hashchange", followHash);
  followHash();
  schedulePoll(0);
}

init();
