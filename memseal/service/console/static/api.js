// The public /v1 API with the tab's bearer token (sessionStorage: gone when the tab closes).
// Authorization is the API's: the console never decides what a token may see.

const KEY = "memseal.token";

export function token() {
  return sessionStorage.getItem(KEY);
}

export function signIn(value) {
  sessionStorage.setItem(KEY, value.trim());
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// One request: JSON in, JSON (or text when `text`) out; a refusal raises ApiError with the
// API's own code and message.
export async function api(path, { method = "GET", body = undefined, text = false, headers = {} } = {}) {
  const h = { ...headers };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  if (body !== undefined) h["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    let code = "http_error";
    let message = `${res.status} ${res.statusText}`;
    try {
      const err = (await res.json()).error;
      code = err.code;
      message = err.message;
    } catch (e) {
      // not the API's error shape: keep the status line
    }
    throw new ApiError(res.status, code, message);
  }
  if (res.status === 204) return null;
  return text ? res.text() : res.json();
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}
