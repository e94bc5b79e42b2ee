// The JSON API, as the signed-in browser calls it: the session cookie authenticates, and the
// server checks the Origin of every write.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * Call the API and return the decoded JSON (or null for an empty answer).
 * `body` is sent as JSON, `form` as multipart; `signal` cancels the call.
 */
export async function api(method, path, { body, form, signal } = {}) {
  const init = { method, signal, credentials: "same-origin", headers: {} };
  if (form) {
    init.body = form;
  } else if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    window.location.assign("/signin");
    throw new ApiError(401, "unauthorized", "Signed out. Open a sign-in link again.");
  }
  const text = await response.text();
  const data = text ? safeJson(text) : null;
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(
      response.status,
      error.code || "http_error",
      error.message || `The server answered ${response.status}.`,
    );
  }
  return data;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// GETs started before their view asked for them (the app's start), each taken once.
const early = new Map();

/** Start GET `path` now: the next get(path) takes its answer instead of asking again. */
export function prefetch(path) {
  const answer = api("GET", path);
  answer.catch(() => {}); // a failure reaches whoever takes it, not the console
  early.set(path, answer);
}

/** Forget what no view took (its view failed to load): a later visit asks afresh. */
export function forgetPrefetched() {
  early.clear();
}

export function get(path, options) {
  const started = early.get(path);
  early.delete(path);
  return started || api("GET", path, options);
}

export const post = (path, body, options = {}) => api("POST", path, { ...options, body });
export const patch = (path, body, options = {}) => api("PATCH", path, { ...options, body });
export const put = (path, body, options = {}) => api("PUT", path, { ...options, body });
export const del = (path, options) => api("DELETE", path, options);

/** Query string from an object, leaving out empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === "") continue;
    for (const item of Array.isArray(value) ? value : [value]) search.append(key, String(item));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
