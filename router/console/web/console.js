// The tessera web console (router/console/console_routes.h): a chat playground over our own
// /v1/chat/completions (playground.js) and the live batch view over /v1/console/events
// (batch_view.js). No dependencies. Every request goes to this page's origin only (the server's
// Content-Security-Policy enforces it), with the API key when the server asks for one (api.js).
import { $, AuthError, api, errorText, hasKey, keyRequired, needKey, setKey, setStatus }
  from "./api.js";
import { batchViewState, freeze, onHover, scheduleDraw, startEvents, stopEvents }
  from "./batch_view.js";
import { setUpPlayground } from "./playground.js";

let model = null;  // the served model's name, once /v1/models answered

async function loadModel() {
  try {
    const response = await api("/v1/models");
    if (!response.ok) {
      setStatus(await errorText(response), true);
      return;
    }
    const body = await response.json();
    model = body.data.length > 0 ? body.data[0].id : null;
    $("model-name").textContent = model || "(no model)";
    setStatus("ready");
  } catch (e) {
    if (!(e instanceof AuthError)) setStatus("cannot reach the server: " + e.message, true);
  }
}

// ---- views -----------------------------------------------------------------------------------

function showView(name) {
  const batch = name === "batch";
  $("chat-view").hidden = batch;
  $("batch-view").hidden = !batch;
  $("tab-chat").classList.toggle("active", !batch);
  $("tab-batch").classList.toggle("active", batch);
  if (batch) {
    startEvents();
    scheduleDraw();
  } else {
    stopEvents();
  }
  history.replaceState(null, "", batch ? "#batch" : "#");
}

function start() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setKey($("api-key").value.trim());
    $("key-form").hidden = true;
    loadModel();
    if (!$("batch-view").hidden) startEvents();
  });
  $("tab-chat").addEventListener("click", () => showView("chat"));
  $("tab-batch").addEventListener("click", () => showView("batch"));
  $("steps-canvas").addEventListener("mousemove", onHover);
  $("steps-canvas").addEventListener("mouseenter", () => freeze(true));
  $("steps-canvas").addEventListener("mouseleave", () => {
    $("tooltip").hidden = true;
    freeze(false);
  });
  window.addEventListener("resize", scheduleDraw);
  setUpPlayground(() => model);
  if (keyRequired && !hasKey()) {
    needKey("this server needs an API key");  // nothing is sent until one is given
  } else {
    loadModel();
  }
  showView(location.hash === "#batch" ? "batch" : "chat");
}

window.tesseraConsole = Object.assign({ model: () => model }, batchViewState);

start();
