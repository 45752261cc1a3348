// The Tasks view: scheduled, planned and ad hoc tasks over the scheduler_* endpoints:
// list with state, last and next run and a link to the task's chat; create, edit (on the
// revision loaded), delete, run now.

import { ApiCallError, callApi, errorText } from "./api.js";
import { el, noticeLine, requestOrder } from "./dom.js";
import { confirmAction } from "./confirm.js";

const $ = (id) => document.getElementById(id);
const CRON = ["minute", "hour", "day", "month", "weekday"];
const STATES = {
  idle: "waiting for its next time",
  running: "its latest run is working",
  held: "its chat's run waits for a decision (Recovery): its times are skipped until then",
  disabled: "switched off",
  damaged: "its stored definition failed its check: it never runs; delete or replace it",
};
const SKIPS = { run_held: "skipped: the chat's run waited for a decision" };
const state = { tasks: [], editing: null, timer: null, openChat: () => {} };

const notice = noticeLine("tasks-message");
const lists = requestOrder(); // a timed refresh sent before a save must not draw after it


function local(iso) {
  return iso ? new Date(iso).toLocaleString() : "-";
}

function when(task) {
  if (task.type === "scheduled" && task.schedule) {
    const fields = CRON.map((name) => task.schedule[name]).join(" ");
    return [el("code", { text: fields }), el("div", { className: "sub", text: task.timezone || "UTC" })];
  }
  if (task.type === "planned" && task.plan) {
    const left = task.plan.todo.length;
    return [el("span", { text: `${task.plan.times.length} planned time(s)` }),
      el("div", { className: "sub", text: `${left} still to come` })];
  }
  return task.type === "adhoc" ? [el("span", { text: "ad hoc (run by hand)" })] : [el("span", { text: "-" })];
}

function lastRun(task) {
  const parts = [el("div", { text: local(task.last_run) })];
  if (task.last_status) {
    const run = task.last_run_id ? `run ${task.last_run_id}` : "";
    parts.push(el("div", { className: "sub", text: task.last_status, title: run, testid: "task-last-status" }));
  }
  if (task.last_skip) {
    const why = SKIPS[task.last_skip.reason] || `skipped (${task.last_skip.reason})`;
    parts.push(el("div", { className: "sub", text: `${local(task.last_skip.slot)}: ${why}`, testid: "task-skip" }));
  }
  return parts;
}

function row(task) {
  const stateBadge = el("span", {
    className: `state ${task.state}`, text: task.state, title: STATES[task.state] || "", testid: "task-state",
  });
  const chat = el("button", { type: "button", text: "Open chat", testid: "task-chat", title: task.context_id || "" });
  const run = el("button", { type: "button", text: "Run now", testid: "task-run" });
  const edit = el("button", { type: "button", text: "Edit", testid: "task-edit" });
  const remove = el("button", { type: "button", text: "Delete", className: "danger", testid: "task-delete" });
  chat.disabled = !task.last_run_id && !task.last_run;
  run.disabled = task.state === "damaged" || task.state === "running";
  chat.addEventListener("click", () => {
    $("tasks-dialog").close();
    state.openChat(task.context_id);
  });
  run.addEventListener("click", () => act(async () => {
    const result = await callApi("scheduler_task_run", { task_id: task.uuid });
    notice(`"${task.name}" started (${result.firing.kind}).`);
  }));
  edit.addEventListener("click", () => openForm(task));
  remove.addEventListener("click", async () => {
    const text = `Delete the task "${task.name}"? It will not run again; its chat and past runs stay.`;
    if (!(await confirmAction(text, "Delete task", "Delete this task?"))) return;
    act(async () => {
      await callApi("scheduler_task_delete", { task_id: task.uuid, expected_revision: task.revision });
      notice(`"${task.name}" deleted; its chat and past runs stay.`);
      if (state.editing?.uuid === task.uuid) closeForm();
    });
  });
  const name = el("td", {}, el("div", { text: task.name || "(no name)" }),
    el("div", { className: "sub", text: task.enabled === false ? "disabled" : task.type || "" }));
  const tr = el("tr", { testid: "task-row" }, name, el("td", {}, ...when(task)), el("td", {}, stateBadge),
    el("td", {}, ...lastRun(task)), el("td", { text: task.due ? "due now" : local(task.next_run), testid: "task-next" }),
    el("td", { className: "actions" }, chat, run, edit, remove));
  tr.dataset.uuid = task.uuid;
  return tr;
}

async function refresh() {
  const turn = lists.next();
  try {
    const body = await callApi("scheduler_tasks_list", {});
    if (!lists.newest(turn)) return;
    state.tasks = body.tasks;
    const rows = body.tasks.map(row);
    $("tasks-list").replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colSpan: 6, className: "muted", text: "No tasks yet." }))]));
  } catch (error) {
    if (lists.newest(turn)) notice(errorText(error));
  }
}

async function act(fn) {
  try {
    await fn();
  } catch (error) {
    notice(errorText(error));
  }
  await refresh();
}

// the form ---------------------------------------------------------------------------------
function showKind() {
  const kind = $("task-type").value;
  $("task-cron").hidden = kind !== "scheduled";
  $("task-plan-label").hidden = kind !== "planned";
}

function openForm(task) {
  state.editing = task || null;
  $("task-form-title").textContent = task ? `Edit "${task.name}"` : "New task";
  $("task-name").value = task?.name || "";
  $("task-type").value = task?.type || "scheduled";
  $("task-timezone").value = task?.timezone || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  $("task-enabled").checked = task ? task.enabled !== false : true;
  for (const name of CRON) $(`task-${name}`).value = task?.schedule?.[name] ?? (name === "minute" ? "0" : "*");
  $("task-plan").value = (task?.plan?.times || []).join("\n");
  $("task-prompt").value = task?.prompt || "";
  $("task-system").value = task?.system_prompt || "";
  $("task-revision").textContent = task ? String(task.revision) : "-";
  showKind();
  $("task-form").hidden = false;
  $("task-name").focus();
}

function closeForm() {
  state.editing = null;
  $("task-form").hidden = true;
}

function formFields() {
  const kind = $("task-type").value;
  const fields = {
    name: $("task-name").value,
    type: kind,
    timezone: $("task-timezone").value.trim() || "UTC",
    enabled: $("task-enabled").checked,
    prompt: $("task-prompt").value,
    system_prompt: $("task-system").value,
  };
  if (kind === "scheduled") {
    fields.schedule = Object.fromEntries(CRON.map((name) => [name, $(`task-${name}`).value.trim() || "*"]));
  }
  if (kind === "planned") {
    fields.plan = $("task-plan").value.split("\n").map((line) => line.trim()).filter(Boolean);
  }
  return fields;
}

async function save(event) {
  event.preventDefault();
  const editing = state.editing;
  try {
    if (editing) {
      const body = { task_id: editing.uuid, expected_revision: Number($("task-revision").textContent), ...formFields() };
      const result = await callApi("scheduler_task_update", body);
      notice(`"${result.task.name}" saved (revision ${result.task.revision}).`);
    } else {
      const result = await callApi("scheduler_task_create", formFields());
      notice(`"${result.task.name}" created; next run ${local(result.task.next_run)}.`);
    }
    closeForm();
  } catch (error) {
    if (error instanceof ApiCallError && error.code === "task_conflict") {
      const current = error.details.current_revision;
      notice(`This task was changed elsewhere since you opened it (revision ${current} is current). ` +
        "Nothing was saved. Your edit is still in the form: Save again to replace that version " +
        "with yours, or Cancel and Edit again to start from it.");
      $("task-revision").textContent = String(current);
    } else {
      notice(errorText(error));
    }
  }
  await refresh();
}

export function openTasks() {
  notice("");
  closeForm();
  refresh();
  $("tasks-dialog").showModal();
  clearInterval(state.timer);
  state.timer = setInterval(() => {
    if ($("tasks-dialog").open) refresh();
    else clearInterval(state.timer);
  }, 2000);
}

export function initTasks(openChat) {
  state.openChat = openChat;
  $("tasks-open").addEventListener("click", openTasks);
  $("tasks-close").addEventListener("click", () => $("tasks-dialog").close());
  $("tasks-refresh").addEventListener("click", () => {
    notice(""); // a notice is about what happened before: Refresh starts from the list as it is
    refresh();
  });
  $("tasks-new").addEventListener("click", () => openForm(null));
  $("task-cancel").addEventListener("click", closeForm);
  $("task-type").addEventListener("change", showKind);
  $("task-form").addEventListener("submit", save);
}
