// Turns poll log items into DOM nodes (one node per log item number, updated in place).

const HEADINGS = {
  user: "You", agent: "Thinking", response: "Answer", tool: "Tool", code_exe: "Code",
  warning: "Warning", error: "Error", info: "Info", util: "Utility", hint: "Hint", progress: "Progress",
};

function formatKvps(kvps) {
  if (!kvps || typeof kvps !== "object") return "";
  const lines = [];
  for (const [key, value] of Object.entries(kvps)) {
    if (value === null || value === undefined || value === "") continue;
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 1);
    lines.push(`${key}: ${text}`);
  }
  return lines.join("\n");
}

export function renderItem(node, item) {
  const type = item.type || "info";
  node.className = `msg ${type}${item.agentno ? " sub" : ""}`;
  node.dataset.type = type;
  node.dataset.testid = `log-${type}`;
  node.setAttribute("data-testid", `log-${type}`);
  node.dataset.no = String(item.no);
  let heading = node.querySelector(".heading");
  let content = node.querySelector(".content");
  let kvps = node.querySelector(".kvps");
  if (!heading) {
    heading = document.createElement("div");
    heading.className = "heading";
    content = document.createElement("div");
    content.className = "content";
    kvps = document.createElement("div");
    kvps.className = "kvps";
    node.append(heading, content, kvps);
  }
  const agent = item.agentno ? ` (A${item.agentno})` : "";
  heading.textContent = (item.heading || HEADINGS[type] || type) + agent;
  // thoughts stream as kvps; answers and tool output as content
  content.textContent = item.content || "";
  kvps.textContent = formatKvps(item.kvps);
  kvps.hidden = !kvps.textContent;
}
