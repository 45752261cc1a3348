// Calls to /api/<name> with the session's CSRF token; errors become ApiCallError.

let csrfToken = null;
export const session = { login: false };

export class ApiCallError extends Error {
  constructor(code, message, status, details = {}) {
    super(message);
    this.code = code;
    this.status = status;
    this.details = details; // the error object's other fields (e.g. field, fields)
  }
}

// What a failed call tells a person: its message, the field it names, and its code.
export function errorText(error) {
  if (!(error instanceof ApiCallError)) return String(error);
  const field = error.details?.field ? ` (field ${error.details.field})` : "";
  return `${error.message}${field} (${error.code})`;
}

let tokenRequest = null;

function fetchToken() {
  // one request at a time: concurrent first calls must share one session token
  tokenRequest ??= requestToken().finally(() => {
    tokenRequest = null;
  });
  return tokenRequest;
}

async function requestToken() {
  const response = await fetch("/api/csrf_token", { credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    if (response.status === 401) location.href = "/login";
    throw new ApiCallError(body.error?.code || "csrf_failed", body.error?.message || "No CSRF token", response.status);
  }
  csrfToken = body.token;
  session.login = Boolean(body.login);
  document.getElementById("logout-link")?.toggleAttribute("hidden", !session.login);
  return csrfToken;
}

function post(name, payload) {
  const isForm = payload instanceof FormData;
  return fetch(`/api/${name}`, {
    method: "POST",
    credentials: "same-origin",
    headers: isForm ? { "X-CSRF-Token": csrfToken } : { "Content-Type": "application/json", "X-CSRF-Token": csrfToken },
    body: isForm ? payload : JSON.stringify(payload ?? {}),
  });
}

async function send(name, payload, retry, raw = false) {
  if (!csrfToken) await fetchToken();
  const response = await post(name, payload);
  if (raw && response.ok) return response;
  const body = await response.json().catch(() => ({}));
  if (response.ok) return body;
  const code = body.error?.code || "http_error";
  if (code === "csrf_failed" && retry) {
    csrfToken = null;
    return send(name, payload, false, raw);
  }
  if (response.status === 401) location.href = "/login";
  const { code: _code, message: _message, ...details } = body.error || {};
  throw new ApiCallError(code, body.error?.message || `HTTP ${response.status}`, response.status, details);
}

export function callApi(name, payload) {
  return send(name, payload, true);
}

/** The raw Response of a successful call (downloads); errors throw ApiCallError as usual. */
export function callApiRaw(name, payload) {
  return send(name, payload, true, true);
}
