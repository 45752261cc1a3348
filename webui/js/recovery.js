// The Recovery panel ("Continue with confidence"): held runs with the evidence to check
// (calls, commands, shell receipts, attempts, earlier decisions, a timeline) and the
// decisions that fit each hold, each explained; standing retry grants; decided runs.

import { ApiCallError, callApi } from "./api.js";
import { el, requestOrder } from "./dom.js";
import { when, keyValues, callTimeline, callsList, decisionsList } from "./recovery_view.js";

export const DECISIONS = [
  ["retry_model_call", "Retry model call",
    "Call the model again at the held position, on purpose (attempt + 1). The count is how " +
    "many tries you allow in all; if the call fails again and tries are left, it is retried " +
    "by itself."],
  ["resume", "Resume",
    "Continue from the last safe checkpoint. The uncertain step is recorded as abandoned " +
    "(outcome unknown) and the agent is told not to repeat it blindly."],
  ["stop", "Stop", "End the run here. Nothing more runs."],
  ["new_attempt", "New attempt", "Run the uncertain step again, on purpose, as attempt + 1."],
  ["confirmed_completed", "Confirmed completed",
    "You checked and it did happen: your note becomes the step's result and the run goes on. " +
    "Note required."],
  ["confirmed_not_completed", "Confirmed not completed",
    "You checked and it did not happen: the step then runs as its first real execution. " +
    "Note required."],
];
const NEEDS_NOTE = new Set(["confirmed_completed", "confirmed_not_completed"]);

// Why a run is held, in plain words; an unknown reason falls back to its code.
const REASONS = {
  uncertain_call: "A call was started but no result was recorded: it may or may not have happened.",
  model_failed: "The model provider failed and no retry is left.",
  corrupt_checkpoint: "The run's last checkpoint is damaged. Nothing was repaired.",
  replay_divergence: "On resume the agent asked for a different call than the one recorded at that position.",
  recovery_attempts_exceeded: "Recovery was tried several times without progress, so the run was parked.",
  recovery_error: "Recovery itself failed for this run.",
  corrupt_record: "A stored record failed its digest check; it was not used. Nothing was repaired.",
};
const PHASES = {
  admitted: "admitted, no call made yet",
  intent_open: "a call was started and has no recorded result",
  result_committed: "between calls: every started call has a recorded result",
  ended: "ended",
};

const $ = (id) => document.getElementById(id);

function notice(content) {
  const box = $("recovery-message");
  if (typeof content === "string") box.textContent = content;
  else box.replaceChildren(...(content || []));
  box.hidden = !content || (typeof content === "string" && !content);
}

function errorText(error) {
  return error instanceof ApiCallError ? `${error.message} (${error.code})` : String(error);
}

function reasonBlock(run) {
  const words = REASONS[run.reason] || `Held (${run.reason || "no reason given"}).`;
  const detail = run.reason_detail && typeof run.reason_detail === "object" ? run.reason_detail : null;
  return el("div", { className: "reason" },
    el("div", {}, el("strong", { text: "Why it is held: " }),
      el("span", { text: words, testid: "reason-text" }), " ",
      el("code", { text: run.reason || "-", testid: "run-reason" })),
    heldDetail(run) ? el("p", { className: "held-detail", text: heldDetail(run), testid: "run-detail" }) : "",
    detail ? keyValues(detail, "reason-detail") : "");
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

// Only the decisions that fit the hold are offered (the server says which, and why the
// others do not: run.decisions_available); the others are listed with their reason.
function decisionForm(run) {
  const name = `decision-${run.run_id}`;
  const fits = new Map((run.decisions_available || []).map((f) => [f.decision, f]));
  const offered = DECISIONS.filter(([value]) => !fits.size || fits.get(value)?.allowed);
  const refused = DECISIONS.filter(([value]) => fits.size && !fits.get(value)?.allowed);
  const options = offered.map(([value, label, help]) =>
    el("label", { className: "decision-option", testid: `decision-${value}` },
      el("input", { type: "radio", name, value }),
      el("span", {}, el("strong", { text: label }), el("span", { className: "muted", text: ` ${help}` }))));
  const attempts = el("input", { type: "number", min: 1, max: 100, value: 1, testid: "decision-attempts" });
  const attemptsRow = offered.some(([value]) => value === "retry_model_call")
    ? el("label", { className: "attempts" }, "Tries allowed for Retry model call ", attempts) : null;
  const notOffered = refused.length ? el("details", { className: "not-offered", testid: "decision-unavailable" },
    el("summary", { text: `Not offered for this hold (${refused.length})` }),
    el("ul", {}, ...refused.map(([value, label]) => el("li", { testid: `unavailable-${value}` },
      el("strong", { text: label }), `: ${fits.get(value)?.why || ""}`)))) : null;
  const note = el("textarea", {
    rows: 2, testid: "decision-note",
    placeholder: "What did you check? (required for the two 'confirmed' decisions)",
  });
  const submit = el("button", { className: "primary", type: "button", text: "Decide", testid: "decision-submit" });
  const form = el("fieldset", { className: "decision-form" },
    el("legend", { text: `Decide on version ${run.version}` }), ...options, attemptsRow, notOffered, note,
    el("div", { className: "dialog-buttons" }, submit));
  submit.addEventListener("click", () => {
    const chosen = form.querySelector(`input[name="${CSS.escape(name)}"]:checked`);
    decide(run, chosen ? chosen.value : "", note.value, Number(attempts.value) || 1);
  });
  return form;
}

// The standing grants that paid for a retry in this run: who authorised it, for what, why.
function standingUses(run) {
  const uses = run.standing_grant_uses || [];
  if (!uses.length) return null;
  return el("div", { className: "standing-uses", testid: "standing-uses" },
    el("h4", { text: "Retried by standing grants" }),
    el("ul", {}, ...uses.map((u) => el("li", {},
      `call ${u.call_id.slice(0, 8)} retried at ${when(u.created_at)}, paid by grant #${u.grant_id} ` +
      `(${u.scope} ${u.target}, ${u.attempts} per run) of ${u.actor}`,
      u.note ? el("div", { className: "note", text: `Note: ${u.note}` }) : null))));
}

// The chat's name (the id only when the chat is not loaded) and a link that opens it.
function chatLink(run) {
  const link = el("a", {
    href: `#chat=${encodeURIComponent(run.context_id)}`, className: "chat-link", testid: "run-chat-link",
    text: run.context_name || `a chat not loaded here (${run.context_id})`, title: `chat id ${run.context_id}`,
  });
  link.addEventListener("click", () => $("recovery-dialog").close());
  return link;
}

function runCard(run) {
  const heldCall = run.reason_detail?.call_id;
  const grants = run.recovery_attempts ? ` · ${run.recovery_attempts} recovery attempt(s) so far` : "";
  return el("article", { className: "run-card", testid: "recovery-run" },
    el("header", {},
      el("strong", { text: `Run ${run.run_id.slice(0, 8)}` }), " in ", chatLink(run),
      ` · status ${run.status} · version ${run.version}${grants}`),
    reasonBlock(run),
    el("div", {}, el("strong", { text: "Phase: " }), el("code", { text: run.phase, testid: "run-phase" }),
      ` ${PHASES[run.phase] || ""}`),
    el("h4", { text: "Timeline" }), callTimeline(run.calls, heldCall),
    el("h4", { text: `Calls (${run.calls.length})` }), callsList(run.calls, heldCall),
    el("h4", { text: "Earlier decisions" }), decisionsList(run.decisions),
    standingUses(run),
    decisionForm(run));
}

function whatChanged(before, after) {
  if (!before) return [];
  const lines = [`version ${before.version} → ${after.version}`];
  if (before.status !== after.status) lines.push(`status ${before.status} → ${after.status}`);
  if (before.reason !== after.reason) lines.push(`reason ${before.reason} → ${after.reason}`);
  const known = new Set(before.calls.map((c) => `${c.call_id}:${c.status}`));
  for (const call of after.calls) {
    if (!known.has(`${call.call_id}:${call.status}`)) {
      lines.push(`call #${call.seq} ${call.name} (attempt ${call.attempt}) is now ${call.status}`);
    }
  }
  for (const d of after.decisions.slice(before.decisions.length)) {
    lines.push(`decision ${d.decision} by ${d.actor} at ${when(d.created_at)}`);
  }
  return lines;
}

async function decide(run, decision, note, attempts = 1) {
  if (!decision) {
    notice("Choose one of the decisions first.");
    return;
  }
  if (NEEDS_NOTE.has(decision) && !note.trim()) {
    notice("A note is required: say what you checked.");
    return;
  }
  try {
    await callApi("durable_decide", {
      run_id: run.run_id, decision, expected_version: run.version, note: note.trim() || undefined,
      attempts: decision === "retry_model_call" ? attempts : undefined,
    });
    notice(`Decision '${decision}' recorded.`);
  } catch (error) {
    if (error instanceof ApiCallError && error.code === "stale_version") {
      const fresh = await callApi("durable_run", { run_id: run.run_id }).then((r) => r.run, () => null);
      const changes = fresh ? whatChanged(run, fresh) : [];
      notice([
        el("span", { text: "The run changed since you loaded it; it has been refreshed. " +
          "Please check it again and decide on the new version." }),
        el("ul", { testid: "stale-changes" }, ...changes.map((line) => el("li", { text: line }))),
      ]);
    } else {
      notice(errorText(error));
    }
  }
  await loadRuns(false);
}

// Only the newest load draws each list: a load sent before a decision (Refresh, opening the
// panel) may answer after the one sent after it, with the run as it was before.
const orders = { runs: requestOrder(), history: requestOrder(), grants: requestOrder() };

export async function loadRuns(clearNotice = true) {
  if (clearNotice) notice("");
  const list = $("recovery-runs");
  const turn = orders.runs.next();
  try {
    const { runs } = await callApi("durable_runs", { status: "needs_attention" });
    const details = await Promise.all(runs.map((r) => callApi("durable_run", { run_id: r.run_id }).then((d) => d.run)));
    if (!orders.runs.newest(turn)) return;
    list.replaceChildren(...(details.length ? details.map(runCard)
      : [el("p", { className: "muted", text: "No run needs attention.", testid: "recovery-empty" })]));
  } catch (error) {
    if (!orders.runs.newest(turn)) return;
    notice(errorText(error));
  }
  await Promise.all([loadHistory(), loadGrants()]);
}

// The history of decided runs: each with its chat, its status now and its latest decision.
async function loadHistory() {
  const box = $("recovery-history");
  const turn = orders.history.next();
  try {
    const { runs } = await callApi("durable_runs", { decided: true, limit: 20 });
    if (!orders.history.newest(turn)) return;
    box.replaceChildren(...(runs.length ? runs.map(historyRow)
      : [el("p", { className: "muted", text: "No run was decided yet." })]));
  } catch (error) {
    if (!orders.history.newest(turn)) return;
    box.replaceChildren(el("p", { className: "error-text", text: errorText(error) }));
  }
}

function historyRow(run) {
  const last = (run.decisions || []).at(-1);
  const said = last ? `${last.decision} by ${last.actor} at ${when(last.created_at)}` : "";
  return el("div", { className: "history-row", testid: "history-run" },
    el("strong", { text: `Run ${run.run_id.slice(0, 8)}` }), " in ", chatLink(run),
    ` · now ${run.status} · ${said}`, last?.note ? el("span", { className: "muted", text: ` (${last.note})` }) : null);
}

// Standing retry grants: N automatic retries of interrupted or failed model calls per run,
// authorised in advance for a chat, a profile or a scheduled task (0 withdraws).
async function loadGrants() {
  const list = $("standing-list");
  const turn = orders.grants.next();
  try {
    const { grants } = await callApi("durable_standing_grants", { limit: 50 });
    if (!orders.grants.newest(turn)) return;
    const inForce = grants.filter((g) => g.in_force && g.attempts > 0);
    list.replaceChildren(...(inForce.length ? inForce.map((g) => el("li", { testid: "standing-grant" },
      `${g.scope} ${g.target}: ${g.attempts} per run, by ${g.actor} at ${when(g.created_at)}`,
      g.note ? el("span", { className: "muted", text: ` (${g.note})` }) : null))
      : [el("li", { className: "muted", text: "None: a failed or interrupted model call waits for a person." })]));
  } catch (error) {
    if (!orders.grants.newest(turn)) return;
    list.replaceChildren(el("li", { className: "error-text", text: errorText(error) }));
  }
}

async function addGrant() {
  try {
    await callApi("durable_standing_grant", {
      scope: $("standing-scope").value, target: $("standing-target").value.trim(),
      attempts: Number($("standing-attempts").value), note: $("standing-note").value.trim() || undefined,
    });
    notice("Standing grant recorded.");
  } catch (error) {
    notice(errorText(error));
  }
  await loadGrants();
}

// Refresh asks the held runs' evidence again first: a receipt that now proves the outcome
// re-classifies its run (it continues by itself), and the panel says what changed.
export async function recheckRuns() {
  let changes = [];
  try {
    ({ changes } = await callApi("durable_recheck", {}));
  } catch (error) {
    notice(errorText(error));
    return loadRuns(false);
  }
  await loadRuns();
  const changed = (changes || []).filter((c) => c.changed);
  if (changed.length) {
    notice(changed.map((c) => `Run ${c.run_id}: ${c.text}`).join(" "));
  }
}

export function openRecovery() {
  $("recovery-dialog").showModal();
  recheckRuns();
}

export function initRecovery() {
  $("recovery-open").addEventListener("click", openRecovery);
  $("held-open").addEventListener("click", openRecovery);
  $("recovery-refresh").addEventListener("click", () => recheckRuns());
  $("recovery-close").addEventListener("click", () => $("recovery-dialog").close());
  $("standing-add").addEventListener("click", addGrant);
}

export function showHeld(snapshot) {
  const held = snapshot.held_run;
  $("held-banner").hidden = !held;
  $("held-reason").textContent = held ? `(reason: ${held.reason})` : "";
  const badge = $("recovery-badge");
  badge.textContent = String(snapshot.held_runs || 0);
  badge.hidden = !snapshot.held_runs;
}
