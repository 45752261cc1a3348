// Building blocks of the Recovery panel: the timeline, the calls with their evidence,
// earlier decisions, and key/value tables for any detail the journal records.

import { callApiRaw } from "./api.js";
import { el } from "./dom.js";

const OUTCOMES = {
  committed: "result committed",
  proven_by_receipt: "proven by its shell receipt",
  confirmed_by_person: "confirmed by a person",
  failed: "failed (result committed)",
  open: "started, no result: uncertain",
  abandoned: "abandoned: outcome unknown, left behind",
  superseded: "superseded by a new attempt",
  not_completed: "confirmed not completed",
};
const POLICIES = {
  hold: "never repeated on its own: held when uncertain",
  safe_replay: "safe to replay",
  "adapter:shell": "a shell receipt proves whether it started and how it ended",
  child: "a subordinate: it resumes from its own checkpoint",
};
const RECEIPTS = {
  not_started: "No start marker: the command never started.",
  unknown: "Start marker without exit marker: the command started and did not report an end.",
  completed: "Start and exit markers: the command ran to its end.",
  rejected: "The receipt does not match this call, so it proves nothing.",
};
const KINDS = { model: "model", tool: "tool", subordinate: "subordinate" };

export function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "-";
}

function valueText(value) {
  if (value === null || value === undefined) return "-";
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

/** Any object as a two-column table (the journal's details are shown as they are). */
export function keyValues(object, testid) {
  const rows = Object.entries(object).map(([key, value]) =>
    el("tr", {}, el("th", { text: key }), el("td", {}, el("code", { text: valueText(value) }))));
  return el("table", { className: "kv", testid }, el("tbody", {}, ...rows));
}

/** The run's calls in order: one step each, coloured by how it ended. */
export function callTimeline(calls, heldCallId) {
  const steps = [...calls]
    .sort((a, b) => a.created_at - b.created_at || a.seq - b.seq)
    .map((call) => {
      const held = call.call_id === heldCallId || call.status === "open";
      const step = el("li", {
        className: `step ${call.outcome}${held ? " held" : ""}`,
        testid: "timeline-step",
        title: `${OUTCOMES[call.outcome] || call.outcome}; ${when(call.created_at)}`,
      },
      el("span", { className: "step-kind", text: KINDS[call.kind] || call.kind }),
      el("span", { className: "step-name", text: call.kind === "model" ? `A${call.agent_no}` : call.name }),
      el("span", { className: "step-outcome", text: held ? "held here" : (OUTCOMES[call.outcome] || call.outcome).split(":")[0] }));
      step.dataset.outcome = call.outcome;
      step.dataset.kind = call.kind;
      return step;
    });
  return el("ol", { className: "timeline", testid: "run-timeline" }, ...steps);
}

// The process id of the shell that ran the command, and what is known of it now. It is
// only checked while the command has no exit marker: once the command ended, whether that
// shell lives on proves nothing. A process id can also be reused by another program.
function shellProcess(receipt) {
  if (!receipt.shell_pid) return "- (the receipt names no shell process)";
  const pid = `process ${receipt.shell_pid}, the shell that ran the command on this server`;
  if (receipt.shell_alive === true) return `${pid}: still running (the command may still be working)`;
  if (receipt.shell_alive === false) return `${pid}: gone (it can no longer finish the command)`;
  return receipt.finished
    ? `${pid}: not checked, the exit marker already proves the command ended`
    : `${pid}: not checked`;
}

function receiptBlock(receipt) {
  const lines = {
    "what it proves": RECEIPTS[receipt.classification] || receipt.classification,
    "start marker": receipt.started ? `yes, ${when(receipt.started_at)}` : "no",
    "exit marker": receipt.finished ? `yes, ${when(receipt.finished_at)}` : "no",
    "exit code": receipt.exit_code ?? "-",
    "shell process": shellProcess(receipt),
  };
  if (receipt.rejected_reason) lines["why rejected"] = receipt.rejected_reason;
  const output = receipt.output_tail
    ? el("pre", { className: "output", text: receipt.output_tail, testid: "receipt-output" })
    : el("p", { className: "muted", text: "No output so far.", testid: "receipt-output" });
  return el("div", { className: "receipt", testid: "receipt-evidence" },
    el("h5", { text: "Shell receipt (read now)" }), keyValues(lines, "receipt-facts"),
    el("div", { className: "muted", text: `Output seen so far (${receipt.output_bytes || 0} bytes):` }), output);
}

// What an effect tool saw just before it acted (the browser's page and a screenshot).
function evidenceBlock(evidence) {
  const lines = { action: evidence.action || "-", page: evidence.url || "-", title: evidence.title || "-" };
  const block = el("div", { className: "receipt", testid: "action-evidence" },
    el("h5", { text: "The page just before the action" }), keyValues(lines, "evidence-facts"));
  if (evidence.screenshot_url) {
    const img = el("img", { className: "browser-shot", testid: "evidence-screenshot" });
    img.alt = "Screenshot taken before the action";
    const query = new URLSearchParams(evidence.screenshot_url.split("?")[1] || "");
    callApiRaw("browser_screenshot", Object.fromEntries(query))
      .then((response) => response.blob())
      .then((blob) => { img.src = URL.createObjectURL(blob); })
      .catch(() => { img.alt = "Screenshot not available"; });
    block.append(img);
  }
  return block;
}

function callBody(call) {
  const parts = [];
  if (call.command) {
    parts.push(el("div", { className: "muted", text: `Command (${call.command.runtime || "terminal"}):` }),
      el("pre", { className: "command", text: call.command.code || "", testid: "call-command" }));
  } else {
    parts.push(el("div", { className: "muted", text: "Arguments (masked):" }),
      el("pre", { className: "args", text: call.args || "-" }));
  }
  if (call.receipt) parts.push(receiptBlock(call.receipt));
  if (call.evidence) parts.push(evidenceBlock(call.evidence));
  if (call.result !== null && call.result !== undefined) {
    parts.push(el("div", { className: "muted", text: "Recorded result:" }),
      el("pre", { className: "result", text: call.result }));
  }
  parts.push(el("div", { className: "muted small",
    text: `Policy: ${call.replay_policy} (${POLICIES[call.replay_policy] || "-"}). ` +
      `Started ${when(call.created_at)}${call.closed_at ? `, closed ${when(call.closed_at)}` : ""}.` }));
  return parts;
}

/** Every call (superseded attempts too), the uncertain ones opened. */
export function callsList(calls, heldCallId) {
  const items = calls.map((call) => {
    const uncertain = call.status === "open" || call.call_id === heldCallId;
    const summary = el("summary", {},
      el("code", { text: `#${call.seq}` }), ` A${call.agent_no} · ${call.kind} · `,
      el("strong", { text: call.name }),
      ` · attempt ${call.attempt} · ${call.damaged ? `${call.status} (damaged: ${call.damaged})` : call.status} · result committed: ${call.committed ? "yes" : "no"}`,
      uncertain ? el("span", { className: "badge", text: "uncertain" }) : null);
    const details = el("details", { className: `call${uncertain ? " uncertain" : ""}`, testid: "recovery-call", open: uncertain },
      summary, ...callBody(call));
    details.dataset.status = call.status;
    return details;
  });
  return el("div", { className: "calls" }, ...items);
}

export function decisionsList(decisions) {
  if (!decisions.length) return el("p", { className: "muted", text: "None yet.", testid: "decision-history" });
  return el("ul", { className: "decisions", testid: "decision-history" },
    ...decisions.map((d) => el("li", {},
      el("strong", { text: d.decision }), ` by ${d.actor} at ${when(d.created_at)} on version ${d.version}`,
      d.note ? el("div", { className: "note", text: `Note: ${d.note}` }) : null)));
}
