// The Plan panel: the chat's durable plan with its revision, edits on the revision loaded,
// and conflicts (a refused write) shown side by side to keep, take or merge.

import { callApi, errorText } from "./api.js";
import { el, noticeLine, requestOrder } from "./dom.js";

const $ = (id) => document.getElementById(id);
const state = { context: null, revision: 0, plan: null, conflicts: [], merging: null };

const notice = noticeLine("plan-message");
const loads = requestOrder();


// editor -----------------------------------------------------------------------------------
function itemRow(item) {
  const done = el("input", { type: "checkbox", checked: Boolean(item.done), testid: "plan-item-done" });
  const text = el("input", { value: item.text || "", testid: "plan-item-text", placeholder: "What to do" });
  const remove = el("button", { type: "button", text: "Remove", className: "danger", testid: "plan-item-remove" });
  const li = el("li", { className: "plan-item", testid: "plan-item" }, done, text,
    el("code", { className: "item-id", text: item.id, title: "item id" }), remove);
  li.dataset.id = item.id;
  remove.addEventListener("click", () => li.remove());
  return li;
}

function renderEditor(plan) {
  $("plan-title").value = plan.title || "";
  $("plan-items").replaceChildren(...(plan.items || []).map(itemRow));
}

function collect() {
  const items = [...$("plan-items").querySelectorAll("li.plan-item")].map((li) => ({
    id: li.dataset.id,
    text: li.querySelector("[data-testid=plan-item-text]").value,
    done: li.querySelector("[data-testid=plan-item-done]").checked,
  }));
  return { title: $("plan-title").value, items };
}

function addItem() {
  const taken = new Set([...$("plan-items").querySelectorAll("li.plan-item")].map((li) => li.dataset.id));
  let n = taken.size + 1;
  while (taken.has(`step-${n}`)) n += 1;
  const row = itemRow({ id: `step-${n}`, text: "", done: false });
  $("plan-items").append(row);
  row.querySelector("[data-testid=plan-item-text]").focus();
}

// conflicts --------------------------------------------------------------------------------
function planList(plan, other, testid) {
  const byId = new Map((other.items || []).map((item) => [item.id, item]));
  const rows = (plan.items || []).map((item) => {
    const twin = byId.get(item.id);
    const mark = !twin ? "only-here" : twin.text !== item.text || twin.done !== item.done ? "changed" : "";
    return el("li", { className: mark, title: mark ? (mark === "changed" ? "differs" : "only in this version") : "" },
      el("span", { className: "done-mark", text: item.done ? "[x] " : "[ ] " }), item.text || "(empty)");
  });
  const title = plan.title === other.title ? plan.title : `${plan.title || "(no title)"} *`;
  return el("div", { className: "plan-version", testid },
    el("div", { className: "plan-version-title", text: title || "(no title)" }),
    el("ol", {}, ...(rows.length ? rows : [el("li", { className: "muted", text: "(no steps)" })])));
}

function mergedSuggestion(current, proposed) {
  // every step of both versions is kept: for a step in both, the proposal's edit wins
  const proposedById = new Map(proposed.items.map((item) => [item.id, item]));
  const items = current.items.map((item) => ({ ...(proposedById.get(item.id) || item) }));
  const seen = new Set(items.map((item) => item.id));
  for (const item of proposed.items) if (!seen.has(item.id)) items.push({ ...item });
  return { title: proposed.title || current.title, items };
}

function conflictCard(conflict) {
  const current = state.plan;
  const keep = el("button", { type: "button", text: "Keep the stored plan", testid: "conflict-keep" });
  const take = el("button", { type: "button", text: "Take the proposed plan", testid: "conflict-take" });
  const merge = el("button", { type: "button", text: "Merge both...", className: "primary", testid: "conflict-merge" });
  keep.addEventListener("click", () => resolve(conflict, "keep_current"));
  take.addEventListener("click", () => resolve(conflict, "take_proposed"));
  merge.addEventListener("click", () => startMerge(conflict));
  const who = conflict.actor === "user" ? "your edit" : `a write by ${conflict.actor}`;
  return el("div", { className: "plan-conflict", testid: "plan-conflict" },
    el("p", {}, el("strong", { text: `Conflict #${conflict.id}: ` }),
      `${who} was made on revision ${conflict.expected_revision}, but revision ${conflict.actual_revision} ` +
      "was stored by then, so it was not applied. Nothing is lost: choose what the plan should be."),
    el("div", { className: "plan-versions" },
      el("div", {}, el("h4", { text: `Stored now (revision ${state.revision})` }),
        planList(current, conflict.proposed, "conflict-current")),
      el("div", {}, el("h4", { text: `Proposed (${conflict.actor})` }),
        planList(conflict.proposed, current, "conflict-proposed"))),
    el("div", { className: "dialog-buttons" }, keep, take, merge));
}

function renderConflicts() {
  const box = $("plan-conflicts");
  box.replaceChildren(...state.conflicts.map(conflictCard));
  box.hidden = !state.conflicts.length;
}

function showMerging() {
  const box = $("plan-merging");
  if (state.merging === null) {
    box.hidden = true;
    return;
  }
  const cancel = el("button", { type: "button", text: "Cancel merge", testid: "plan-merge-cancel" });
  cancel.addEventListener("click", () => {
    state.merging = null;
    renderEditor(state.plan);
    showMerging();
  });
  box.replaceChildren(`Merging conflict #${state.merging}: both versions' steps are below; edit them, then Save. `, cancel);
  box.hidden = false;
}

function startMerge(conflict) {
  state.merging = conflict.id;
  renderEditor(mergedSuggestion(state.plan, conflict.proposed));
  showMerging();
}

async function resolve(conflict, resolution, plan) {
  try {
    const body = { conflict_id: conflict.id, resolution, expected_revision: state.revision };
    if (plan) body.plan = plan;
    const result = await callApi("durable_conflict_resolve", body);
    state.merging = null;
    await load();
    notice(`Conflict #${conflict.id} resolved (${result.conflict.resolution}); the plan is at revision ${result.revision}.`);
  } catch (error) {
    await load(error.code === "stale_revision" ? false : true);
    notice(errorText(error));
  }
}

// load and save ----------------------------------------------------------------------------
async function load(resetEditor = true) {
  const turn = loads.next(); // only the newest load draws (an older one may answer late)
  try {
    const result = await callApi("durable_plan_get", { context_id: state.context });
    if (!loads.newest(turn)) return;
    state.revision = result.revision;
    state.plan = result.plan;
    state.conflicts = result.conflicts;
    $("plan-revision").textContent = String(result.revision);
    if (resetEditor || state.merging === null) renderEditor(result.plan);
    if (!state.conflicts.some((c) => c.id === state.merging)) state.merging = null;
    renderConflicts();
    showMerging();
  } catch (error) {
    if (loads.newest(turn)) notice(errorText(error));
  }
}

async function save() {
  const plan = collect();
  if (state.merging !== null) {
    const conflict = state.conflicts.find((c) => c.id === state.merging);
    if (conflict) return resolve(conflict, "merge", plan);
  }
  try {
    const result = await callApi("durable_plan_set", {
      context_id: state.context, expected_revision: state.revision, plan,
    });
    await load();
    notice(`Saved as revision ${result.revision}.`);
  } catch (error) {
    if (error.code === "document_conflict") {
      await load();
      notice("The plan changed while you were editing: your version was not applied but kept. " +
        "Compare both versions below and choose or merge.");
    } else {
      notice(errorText(error));
    }
  }
}

export function openPlan(context) {
  if (!context) return;
  state.context = context;
  state.merging = null;
  notice("");
  $("plan-dialog").showModal();
  load();
}

export function initPlan(currentContext) {
  $("plan-open").addEventListener("click", () => openPlan(currentContext()));
  $("plan-add").addEventListener("click", addItem);
  $("plan-save").addEventListener("click", save);
  $("plan-reload").addEventListener("click", () => {
    state.merging = null;
    notice("");
    load();
  });
  $("plan-close").addEventListener("click", () => $("plan-dialog").close());
}
