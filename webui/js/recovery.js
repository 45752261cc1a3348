// The Recovery panel ("Continue with confidence"): held runs, their calls, the five decisions.

import { ApiCallError, callApi } from "./api.js";

const DECISIONS = [
  ["resume", "Resume: continue; the uncertain step is recorded as unknown and not repeated"],
  ["stop", "Stop: end the run"],
  ["new_attempt", "New attempt: run the uncertain step again, on purpose"],
  ["confirmed_completed", "Confirmed completed: I checked, it happened (note required)"],
  ["confirmed_not_completed", "Confirmed not completed: I checked, it did not happen (note required)"],
];
const NEEDS_NOTE = new Set(["confirmed_completed", "confirmed_not_completed"]);

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "testid") node.setAttribute("data-testid", value);
    else if (key === "text") node.textContent = value;
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

function notice(text) {
  const box = $("recovery-message");
  box.textContent = text || "";
  box.hidden = !text;
}

function callsTable(calls) {
  const head = el("tr", {}, ...["#", "agent", "kind", "name", "status", "result committed", "policy"].map(
    (h) => el("th", { text: h }),
  ));
  const rows = calls.map((call) =>
    el(
      "tr",
      { className: call.committed ? "" : "uncertain", testid: "recovery-call" },
      el("td", { text: String(call.seq) }),
      el("td", { text: String(call.agent_no) }),
      el("td", { text: call.kind }),
      el("td", { text: call.name }),
      el("td", { text: call.damaged ? `${call.status} (damaged: ${call.damaged})` : call.status }),
      el("td", { text: call.committed ? "yes" : "no" }),
      el("td", { text: call.replay_policy }),
    ),
  );
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

// What a hold names beyond its reason: the damaged record (corrupt_record) or the failure
// (recovery_error), so a person knows what to check before deciding.
export function heldDetail(run) {
  const d = run.reason_detail;
  if (!d || typeof d !== "object") return "";
  if (run.reason === "corrupt_record") {
    const where = d.call_id
      ? `call ${d.call_id} (${d.name}, agent ${d.agent_no}, seq ${d.seq}, attempt ${d.attempt})`
      : d.event_id !== undefined ? `event ${d.event_id} (${d.event_type})`
      : `document ${d.kind} (revision ${d.revision})`;
    return `Damaged record, not used: ${d.record} of ${where}: ${d.reason}.`;
  }
  if (run.reason === "recovery_error") {
    return `Recovery failed while ${d.stage === "restore" ? "rebuilding the chat" : "resuming"}: ` +
      `${d.type}${d.message ? `: ${d.message}` : ""}.`;
  }
  return "";
}

function runCard(run) {
  const select = el("select", { testid: "decision-select" },
    ...DECISIONS.map(([value, label]) => el("option", { value, text: label })));
  const note = el("textarea", { rows: 2, placeholder: "What did you check? (required for confirmed_*)", testid: "decision-note" });
  const submit = el("button", { className: "primary", type: "button", text: "Decide", testid: "decision-submit" });
  submit.addEventListener("click", () => decide(run, select.value, note.value));
  const reason = run.reason_detail?.name ? `${run.reason} (${run.reason_detail.name})` : run.reason;
  return el(
    "div",
    { className: "run-card", testid: "recovery-run" },
    el("div", {},
      el("strong", { text: `Run ${run.run_id.slice(0, 8)}` }),
      ` in chat ${run.context_id} · reason `, el("code", { text: reason || "-", testid: "run-reason" }),
      " · phase ", el("code", { text: run.phase, testid: "run-phase" }),
      ` · version ${run.version}`),
    ...(heldDetail(run) ? [el("p", { className: "held-detail", text: heldDetail(run), testid: "run-detail" })] : []),
    callsTable(run.calls),
    el("div", { className: "decision-row" }, select, note, submit),
  );
}

async function decide(run, decision, note) {
  if (NEEDS_NOTE.has(decision) && !note.trim()) {
    notice("A note is required: say what you checked.");
    return;
  }
  try {
    await callApi("durable_decide", {
      run_id: run.run_id, decision, expected_version: run.version, note: note.trim() || undefined,
    });
    notice(`Decision '${decision}' recorded.`);
  } catch (error) {
    if (error instanceof ApiCallError && error.code === "stale_version") {
      notice("The run changed since you loaded it; it has been refreshed. Please check and decide again.");
    } else {
      notice(error instanceof ApiCallError ? `${error.message} (${error.code})` : String(error));
    }
  }
  await loadRuns(false);
}

export async function loadRuns(clearNotice = true) {
  if (clearNotice) notice("");
  const list = $("recovery-runs");
  try {
    const { runs } = await callApi("durable_runs", { status: "needs_attention" });
    list.replaceChildren(...(runs.length ? runs.map(runCard)
      : [el("p", { className: "muted", text: "No run needs attention.", testid: "recovery-empty" })]));
  } catch (error) {
    notice(error instanceof ApiCallError ? `${error.message} (${error.code})` : String(error));
  }
}

export function openRecovery() {
  $("recovery-dialog").showModal();
  loadRuns();
}

export function initRecovery() {
  $("recovery-open").addEventListener("click", openRecovery);
  $("held-open").addEventListener("click", openRecovery);
  $("recovery-refresh").addEventListener("click", () => loadRuns());
  $("recovery-close").addEventListener("click", () => $("recovery-dialog").close());
}

export function showHeld(snapshot) {
  const held = snapshot.held_run;
  $("held-banner").hidden = !held;
  $("held-reason").textContent = held ? `(reason: ${held.reason})` : "";
  const badge = $("recovery-badge");
  badge.textContent = String(snapshot.held_runs || 0);
  badge.hidden = !snapshot.held_runs;
}
