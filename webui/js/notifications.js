// Notifications: toasts bottom-right (at most five), a bell with the unread counts and a
// history dialog, fed by the poll (upstream's notifications_* fields). An action that fails
// in this page becomes an error toast that stays until it is closed or a newer error
// replaces it.

import { ApiCallError, callApi } from "./api.js";
import { el } from "./dom.js";
import DOMPurify from "/vendor/dompurify/purify.es.mjs";

const MAX_TOASTS = 5;
const HIGH = 20;
const RECENT_MS = 5 * 60 * 1000; // read items stay in the history view this long
const ACTION_ERROR_GROUP = "action-error";

const state = { guid: "", version: 0, items: new Map(), toasted: new Set(), local: [], localNo: 0 };
const $ = (id) => document.getElementById(id);

/** The update index the next poll asks from (`notifications_from`). */
export function notificationsFrom() {
  return state.version;
}

function isLocal(item) {
  return item.id.startsWith("local-");
}

function markRead(ids) {
  const server = ids.filter((id) => !id.startsWith("local-"));
  for (const item of state.local) if (ids.includes(item.id)) item.read = true;
  for (const id of server) {
    const item = state.items.get(id);
    if (item) item.read = true;
  }
  updateBell();
  if (server.length) callApi("notifications_mark_read", { notification_ids: server }).catch(() => {});
}

function removeToast(toast, read) {
  clearTimeout(toast.timer);
  toast.remove();
  if (read) markRead([toast.dataset.id]);
}

function toastFor(item) {
  const high = item.priority >= HIGH;
  const close = el("button", { type: "button", className: "toast-close", text: "×", title: "Dismiss",
    testid: "toast-close", ariaLabel: "Dismiss" });
  const detail = item.detail ? el("div", { className: "toast-detail", testid: "toast-detail" }) : null;
  if (detail) detail.innerHTML = DOMPurify.sanitize(item.detail);
  const toast = el("div", { className: `toast ${item.type}${high ? " high" : ""}`, testid: "toast",
    role: item.type === "error" ? "alert" : "status" },
  el("div", { className: "toast-head" },
    el("strong", { text: item.title || defaultTitle(item.type), testid: "toast-title" }),
    el("span", { className: "toast-priority", text: high ? "high priority" : "", testid: "toast-priority" }),
    close),
  el("div", { className: "toast-message", text: item.message, testid: "toast-message" }),
  item.code ? el("code", { className: "toast-code", text: item.code, testid: "toast-code" }) : null,
  detail);
  toast.dataset.id = item.id;
  toast.dataset.type = item.type;
  toast.dataset.priority = String(item.priority);
  toast.dataset.group = item.group || "";
  close.addEventListener("click", () => removeToast(toast, true));
  const seconds = Number(item.display_time) || 0;
  if (seconds > 0) {
    // a timed-out normal toast counts as read; a high one stays unread until it is closed
    toast.timer = setTimeout(() => removeToast(toast, !high), seconds * 1000);
  }
  return toast;
}

function defaultTitle(type) {
  return { error: "Error", warning: "Warning", success: "Done", progress: "In progress" }[type] || "Notice";
}

function showToast(item) {
  const stack = $("toasts");
  const same = [...stack.children].find((t) => t.dataset.id === item.id ||
    (item.group && t.dataset.group === item.group));
  const toast = toastFor(item);
  if (same) {
    clearTimeout(same.timer);
    same.replaceWith(toast);
  } else {
    stack.append(toast);
  }
  while (stack.children.length > MAX_TOASTS) removeToast(stack.firstElementChild, false);
}

/** Take the poll's notification fields; toasts appear for new unread items. */
export function applyNotifications(snapshot) {
  if (snapshot.notifications_guid !== state.guid) {
    const first = state.guid === "";
    state.guid = snapshot.notifications_guid;
    state.items.clear();
    state.toasted.clear();
    for (const toast of [...$("toasts").children]) if (!isLocal(toast.dataset)) removeToast(toast, false);
    if (!first) {
      state.version = 0; // a new list (a restart, a clear): the next poll fetches it whole
      updateBell();
      return;
    }
  }
  for (const item of snapshot.notifications || []) {
    const before = state.items.get(item.id);
    state.items.set(item.id, item);
    const changed = !before || before.timestamp !== item.timestamp;
    if (!item.read && changed) showToast(item);
    if (item.read) {
      const toast = [...$("toasts").children].find((t) => t.dataset.id === item.id);
      if (toast) removeToast(toast, false);
    }
  }
  state.version = snapshot.notifications_version;
  updateBell();
}

/** An action of this page failed: an error toast that stays until closed or replaced. */
export function notifyError(error) {
  const api = error instanceof ApiCallError;
  state.localNo += 1;
  const item = {
    id: `local-${state.localNo}`, type: "error", priority: HIGH, title: "That did not work",
    message: api ? error.message : String(error?.message || error), code: api ? error.code : "",
    detail: "", display_time: 0, read: false, group: ACTION_ERROR_GROUP,
    timestamp: new Date().toISOString(),
  };
  for (const old of state.local) if (old.group === ACTION_ERROR_GROUP) old.read = true;
  state.local.push(item);
  state.local.splice(0, Math.max(0, state.local.length - 20));
  showToast(item);
  updateBell();
}

function allItems() {
  return [...state.items.values(), ...state.local].sort((a, b) => a.timestamp.localeCompare(b.timestamp));
}

function updateBell() {
  const unread = allItems().filter((n) => !n.read);
  const high = unread.filter((n) => n.priority >= HIGH).length;
  $("notifications-unread").textContent = String(unread.length);
  $("notifications-unread").hidden = !unread.length;
  $("notifications-high").textContent = `${high} high`;
  $("notifications-high").hidden = !high;
  if ($("notifications-dialog").open) renderHistory();
}

function renderHistory() {
  const now = Date.now();
  const shown = allItems().filter((n) => !n.read || now - Date.parse(n.timestamp) < RECENT_MS).reverse();
  const rows = shown.map((n) => {
    const detail = n.detail ? el("div", { className: "toast-detail" }) : null;
    if (detail) detail.innerHTML = DOMPurify.sanitize(n.detail);
    const row = el("li", { className: `history-item ${n.type}${n.read ? " read" : ""}`, testid: "notification-item" },
      el("div", {}, el("strong", { text: n.title || defaultTitle(n.type) }),
        el("span", { className: "muted small", text: ` ${new Date(n.timestamp).toLocaleTimeString()}` +
          `${n.priority >= HIGH ? " · high priority" : ""}${n.read ? " · read" : ""}` })),
      el("div", { text: n.message }), n.code ? el("code", { text: n.code }) : null, detail);
    row.dataset.id = n.id;
    return row;
  });
  $("notifications-list").replaceChildren(...(rows.length ? rows
    : [el("li", { className: "muted", text: "No notifications.", testid: "notifications-empty" })]));
}

async function markAll() {
  for (const item of state.local) item.read = true;
  for (const toast of [...$("toasts").children]) removeToast(toast, false);
  try {
    await callApi("notifications_mark_read", { mark_all: true });
    for (const item of state.items.values()) item.read = true;
  } catch (error) {
    notifyError(error);
  }
  updateBell();
}

async function clearAll() {
  try {
    await callApi("notifications_clear", {});
    state.local = [];
    for (const toast of [...$("toasts").children]) removeToast(toast, false);
    state.items.clear();
  } catch (error) {
    notifyError(error);
  }
  updateBell();
}

export function initNotifications() {
  $("notifications-open").addEventListener("click", () => {
    renderHistory();
    $("notifications-dialog").showModal();
  });
  $("notifications-mark-read").addEventListener("click", markAll);
  $("notifications-clear").addEventListener("click", clearAll);
  $("notifications-close").addEventListener("click", () => $("notifications-dialog").close());
}
