// The console's talk with its server (router/console/console_routes.h): the status line, the
// API key (asked for when the server needs one, kept for the tab), fetch with the key, and
// server-sent events read from a fetch body.

export const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "tessera-console-api-key";
let key = sessionStorage.getItem(KEY_STORAGE) || "";

export function hasKey() { return key !== ""; }

export function setKey(value) {
  key = value;
  sessionStorage.setItem(KEY_STORAGE, key);
}

export class AuthError extends Error {}
// Set by the server in the page (console_routes.cc).
export const keyRequired = document.body.dataset.keyRequired === "true";

// ---- status line and API key ---------------------------------------------------------------

export function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

export function needKey(message) {
  $("key-form").hidden = false;
  setStatus(message, true);
}

export async function api(path, init = {}) {
  const headers = Object.assign({}, init.headers || {});
  if (key) headers["Authorization"] = "Bearer " + key;
  const response = await fetch(path, Object.assign({}, init, { headers }));
  if (response.status === 401) {
    needKey(key ? "the API key was refused" : "this server needs an API key");
    throw new AuthError("unauthorized");
  }
  return response;
}

export async function errorText(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body.error && body.error.message) return body.error.message;
  } catch (e) { /* not JSON: the text itself */ }
  return text.trim() || "HTTP " + response.status;
}

// ---- server-sent events over fetch (EventSource cannot send the API key) -------------------

export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length > 0) onEvent(event, data.join("\n"));
    }
  }
}
