// The playground: a chat that streams through /v1/chat/completions, with the sampling controls,
// a system prompt, stop strings, each answer's token counts and speed, and Stop (which aborts the
// fetch; the server cancels the request when its client leaves).
import { $, AuthError, api, errorText, readEvents } from "./api.js";

const chat = {
  history: [],       // the conversation: {role, content}
  abort: null,       // the running answer's AbortController
  model: () => null, // the served model's name
};

function addMessage(role, text) {
  const message = document.createElement("div");
  message.className = "message " + role;
  const body = document.createElement("span");
  body.className = "body";
  body.textContent = text;
  message.appendChild(body);
  $("messages").appendChild(message);
  $("messages").scrollTop = $("messages").scrollHeight;
  return message;
}

function chatRequest() {
  const messages = [];
  const system = $("system-prompt").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...chat.history);
  const request = {
    model: chat.model(),
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    top_p: Number($("top-p").value),
    max_tokens: parseInt($("max-tokens").value, 10),
  };
  const seed = $("seed").value.trim();
  if (seed !== "") request.seed = parseInt(seed, 10);
  const stops = $("stop-strings").value.split("\n").filter((s) => s.length > 0);
  if (stops.length > 0) request.stop = stops;
  return request;
}

function setBusy(busy) {
  $("send-button").disabled = busy;
  $("stop-button").disabled = !busy;
}

// "12 prompt tokens · 42 tokens · 118.3 tok/s · first token 35 ms · stop" under an answer;
// tokens/s counts the tokens after the first over the time after it (the decode rate, as
// llama.cpp's UI shows it), or all of them over the whole answer when there is one.
function answerMeta(answer) {
  const parts = [];
  const end = answer.end ?? performance.now();
  if (answer.usage) {
    parts.push(answer.usage.prompt_tokens + " prompt tokens");
    parts.push(answer.usage.completion_tokens + " tokens");
  } else {
    parts.push("≈" + answer.pieces + " tokens");
  }
  const tokens = answer.usage ? answer.usage.completion_tokens : answer.pieces;
  if (answer.first !== null && end > answer.started) {
    const rate = tokens > 1 && end > answer.first
      ? (tokens - 1) / ((end - answer.first) / 1000)
      : tokens / ((end - answer.started) / 1000);
    parts.push(rate.toFixed(1) + " tok/s");
    parts.push("first token " + Math.round(answer.first - answer.started) + " ms");
  }
  if (answer.finish) parts.push(answer.finish);
  return parts.join(" · ");
}

function onChatChunk(answer, data) {
  if (data === "[DONE]") return;
  const chunk = JSON.parse(data);
  if (chunk.usage) answer.usage = chunk.usage;
  for (const choice of chunk.choices || []) {
    const piece = choice.delta && choice.delta.content;
    if (piece) {
      if (answer.first === null) answer.first = performance.now();
      answer.text += piece;
      answer.pieces += 1;
      answer.body.textContent = answer.text;
      $("messages").scrollTop = $("messages").scrollHeight;
    }
    if (choice.finish_reason) answer.finish = choice.finish_reason;
  }
}

async function streamAnswer(answer, signal) {
  const response = await api("/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(chatRequest()),
    signal,
  });
  if (!response.ok) throw new Error(await errorText(response));
  await readEvents(response, (event, data) => onChatChunk(answer, data));
}

async function sendMessage(text) {
  chat.history.push({ role: "user", content: text });
  addMessage("user", text);
  const bubble = addMessage("assistant", "");
  const meta = document.createElement("span");
  meta.className = "meta";
  bubble.appendChild(meta);
  const answer = { body: bubble.querySelector(".body"), text: "", pieces: 0, usage: null,
                   finish: null, started: performance.now(), first: null, end: null };
  const controller = new AbortController();
  chat.abort = controller;
  setBusy(true);
  try {
    await streamAnswer(answer, controller.signal);
  } catch (e) {
    if (e.name === "AbortError") {
      answer.finish = "stopped";
    } else if (!(e instanceof AuthError)) {
      bubble.className = "message error";
      answer.body.textContent = e.message;
    }
  } finally {
    answer.end = performance.now();
    chat.abort = null;
    setBusy(false);
  }
  if (answer.text) chat.history.push({ role: "assistant", content: answer.text });
  meta.textContent = answerMeta(answer);
}

export function setUpPlayground(model) {
  chat.model = model;
  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("chat-input").value.trim();
    if (!text || chat.abort) return;
    $("chat-input").value = "";
    sendMessage(text);
  });
  $("chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("chat-form").requestSubmit();
    }
  });
  $("stop-button").addEventListener("click", () => {
    if (chat.abort) chat.abort.abort();
  });
  $("new-chat").addEventListener("click", () => {
    if (chat.abort) chat.abort.abort();
    chat.history = [];
    $("messages").replaceChildren();
  });
}
