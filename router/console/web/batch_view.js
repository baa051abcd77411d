// The live batch view: the step records and stats from /v1/console/events, the gauges per
// worker, and the chart (our own canvas: one stacked bar per step, a segment per request, prefill
// striped, graph replays marked; held still while the pointer is on it; hover for the details).
import { $, AuthError, api, errorText, hasKey, keyRequired, readEvents, setStatus } from "./api.js";

const STEPS_SHOWN = 300;      // per worker, newest on the right
const MIN_SLOTS = 60;         // bars no wider than 1/60 of the chart while few steps are held
const GAUGE_WINDOW = 100;     // steps behind graph reuse and hostproc
const MIN_SEGMENT_PX = 2;     // a 1-token decode stays visible next to a long prefill chunk

const live = {
  eventsAbort: null,          // the stream, while the batch view is shown
  steps: new Map(),           // worker -> its newest step records
  stats: null,                // the last stats event
  previousStats: null,        // and the one before it, with their arrival times
  bars: [],                   // what the last draw put where (hover and tests)
  drawPending: false,
  frozen: false,              // the pointer is on the chart: hold it still to be read
};

// ---- live batch view: the stream --------------------------------------------------------------

function onConsoleEvent(event, data) {
  if (event === "stats") {
    live.previousStats = live.stats;
    live.stats = { at: performance.now(), body: JSON.parse(data) };
    renderGauges();
    return;
  }
  if (event !== "step") return;
  const record = JSON.parse(data);
  record.arrived = performance.now();
  if (!live.steps.has(record.worker)) live.steps.set(record.worker, []);
  const steps = live.steps.get(record.worker);
  steps.push(record);
  if (steps.length > STEPS_SHOWN) steps.splice(0, steps.length - STEPS_SHOWN);
  scheduleDraw();
}

async function watchSteps(controller) {
  const response = await api("/v1/console/events", { signal: controller.signal });
  if (!response.ok) throw new Error(await errorText(response));
  setStatus("live");
  await readEvents(response, onConsoleEvent);
}

// Watches while the batch view is shown; the server stops building records when nobody does.
export async function startEvents() {
  if (live.eventsAbort || (keyRequired && !hasKey())) return;
  const controller = new AbortController();
  live.eventsAbort = controller;
  while (live.eventsAbort === controller) {
    try {
      await watchSteps(controller);
    } catch (e) {
      if (e.name === "AbortError" || e instanceof AuthError) break;
      setStatus("live view: " + e.message, true);
    }
    if (live.eventsAbort !== controller) break;
    await new Promise((resolve) => setTimeout(resolve, 2000));  // reconnect
  }
  if (live.eventsAbort === controller) live.eventsAbort = null;
}

export function stopEvents() {
  if (!live.eventsAbort) return;
  live.eventsAbort.abort();
  live.eventsAbort = null;
}

// ---- live batch view: the gauges -----------------------------------------------------------

function percent(x) { return Number.isFinite(x) ? (100 * x).toFixed(1) + "%" : "–"; }

// Graph reuse, hostproc and device busy from the worker's own step records (the same device
// time the worker's tessera_gpu_busy_ratio adds up): over the last GAUGE_WINDOW steps, and
// device busy over the last second of step starts.
function stepGauges(worker) {
  const steps = (live.steps.get(worker) || []).filter((s) => s.total_s !== null);
  const recent = steps.slice(-GAUGE_WINDOW);
  const gauges = { reuse: NaN, hostproc: NaN, busy: NaN };
  if (recent.length === 0) return gauges;
  gauges.reuse = recent.filter((s) => s.graph_replayed).length / recent.length;
  gauges.hostproc = recent.reduce((sum, s) => sum + s.host_s, 0) / recent.length;
  const newest = steps[steps.length - 1];
  if (performance.now() - newest.arrived > 1500) {
    gauges.busy = 0;  // idle
  } else {
    const second = steps.filter((s) => s.sent_s > newest.sent_s - 1.0);
    gauges.busy = Math.min(1, second.reduce((sum, s) => sum + s.device_s, 0) / 1.0);
  }
  return gauges;
}

function stepsPerSecond(worker) {
  if (!live.previousStats) return NaN;
  const before = live.previousStats.body.workers.find((w) => w.index === worker.index);
  const seconds = (live.stats.at - live.previousStats.at) / 1000;
  return before && seconds > 0 ? (worker.steps - before.steps) / seconds : NaN;
}

function gaugeCells(worker) {
  const steps = stepGauges(worker.index);
  const free = worker.kv_blocks_total - worker.kv_blocks_used;
  const hits = worker.prefix_query_tokens > 0
    ? worker.prefix_hit_tokens / worker.prefix_query_tokens : NaN;
  const rate = stepsPerSecond(worker);
  return [
    worker.index + (worker.serving ? "" : " (not serving)"),
    worker.running, worker.waiting,
    worker.kv_blocks_used + " / " + worker.kv_blocks_total, worker.kv_blocks_cached, free,
    percent(hits), Number.isFinite(rate) ? rate.toFixed(1) : "–", percent(steps.reuse),
    Number.isFinite(steps.hostproc) ? (1000 * steps.hostproc).toFixed(3) + " ms" : "–",
    percent(steps.busy),
  ];
}

function renderGauges() {
  const body = live.stats.body;
  const rows = body.workers.map((worker) => {
    const row = document.createElement("tr");
    row.dataset.worker = worker.index;
    for (const value of gaugeCells(worker)) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.appendChild(cell);
    }
    return row;
  });
  $("gauge-rows").replaceChildren(...rows);
  $("feed-note").textContent = body.dropped > 0
    ? body.dropped + " step records dropped: this view fell behind" : "";
}

// ---- live batch view: the chart ---------------------------------------------------------------

function hueOf(id) {
  let hash = 2166136261;  // FNV-1a: a request keeps its colour across steps
  for (let i = 0; i < id.length; ++i) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  return (hash >>> 0) % 360;
}

const stripeCache = new Map();
function fillFor(context, id, kind) {
  const colour = "hsl(" + hueOf(id) + ", 62%, 50%)";
  if (kind !== "prefill") return colour;
  if (!stripeCache.has(colour)) {
    const tile = document.createElement("canvas");
    tile.width = tile.height = 6;
    const t = tile.getContext("2d");
    t.fillStyle = "#ffffff";
    t.fillRect(0, 0, 6, 6);
    t.strokeStyle = colour;
    t.lineWidth = 2.5;
    t.beginPath();
    t.moveTo(-1, 7); t.lineTo(7, -1);
    t.moveTo(5, 7); t.lineTo(7, 5);
    t.moveTo(-1, 1); t.lineTo(1, -1);
    t.stroke();
    stripeCache.set(colour, context.createPattern(tile, "repeat"));
  }
  return stripeCache.get(colour);
}

export function scheduleDraw() {
  if (live.drawPending || live.frozen) return;
  live.drawPending = true;
  requestAnimationFrame(() => {
    live.drawPending = false;
    draw();
  });
}

function sizeCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
  }
  const context = canvas.getContext("2d");
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  return context;
}

function draw() {
  const canvas = $("steps-canvas");
  const context = sizeCanvas(canvas);
  const width = canvas.clientWidth, height = canvas.clientHeight;
  context.clearRect(0, 0, width, height);
  live.bars = [];
  const workers = [...live.steps.keys()].sort((a, b) => a - b);
  if (workers.length === 0) {
    context.fillStyle = "#6b7280";
    context.font = "14px system-ui, sans-serif";
    context.fillText("waiting for steps: send a request", 56, 40);
    return;
  }
  const laneHeight = height / workers.length;
  workers.forEach((worker, lane) => {
    drawLane(context, worker, { top: lane * laneHeight, height: laneHeight, width });
  });
}

function niceMax(value) {
  const power = Math.pow(10, Math.floor(Math.log10(Math.max(1, value))));
  for (const step of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    if (step * power >= value) return Math.ceil(step * power);
  }
  return 10 * power;
}

function drawAxis(context, worker, area, plot, yMax) {
  context.fillStyle = "#6b7280";
  context.font = "11px system-ui, sans-serif";
  context.fillText("worker " + worker, 6, area.top + 14);
  context.fillText(String(yMax), 6, plot.top + 10);
  context.fillText("0", 6, plot.bottom);
  context.fillText("tokens", 6, plot.top + plot.height / 2);
  context.strokeStyle = "#d9dbe0";
  context.beginPath();
  context.moveTo(plot.left, plot.bottom + 0.5);
  context.lineTo(plot.left + plot.width, plot.bottom + 0.5);
  context.stroke();
}

function drawLane(context, worker, area) {
  const steps = live.steps.get(worker);
  const plot = { left: 48, top: area.top + 22, width: area.width - 56, height: area.height - 30 };
  plot.bottom = plot.top + plot.height;
  const yMax = niceMax(Math.max(1, ...steps.map((s) => s.num_tokens)));
  drawAxis(context, worker, area, plot, yMax);
  // The bars fill the width as steps arrive, then narrow until STEPS_SHOWN fit.
  const slots = Math.min(STEPS_SHOWN, Math.max(MIN_SLOTS, steps.length));
  const slot = plot.width / slots;
  const first = slots - steps.length;  // newest on the right
  steps.forEach((step, i) => {
    const x = plot.left + (first + i) * slot;
    drawBar(context, worker, step, { x, slot, width: Math.max(1, slot - 1), plot, yMax });
  });
}

function drawBar(context, worker, step, bar) {
  let y = bar.plot.bottom;
  const segments = [];
  for (const request of step.requests) {
    const h = Math.max(MIN_SEGMENT_PX, (request.tokens / bar.yMax) * bar.plot.height);
    const top = Math.max(bar.plot.top, y - h);
    context.fillStyle = fillFor(context, request.id, request.kind);
    context.fillRect(bar.x, top, bar.width, y - top);
    segments.push({ id: request.id, kind: request.kind, tokens: request.tokens,
                    start: request.start, top, bottom: y });
    y = top;
  }
  if (step.graph_replayed) {
    context.fillStyle = "#222";
    context.beginPath();
    context.moveTo(bar.x + bar.width / 2, y - 7);
    context.lineTo(bar.x + bar.width / 2 - 3, y - 2);
    context.lineTo(bar.x + bar.width / 2 + 3, y - 2);
    context.fill();
  }
  live.bars.push({ worker, step, x: bar.x, width: bar.width, slot: bar.slot, top: y,
                    bottom: bar.plot.bottom,
                    laneTop: bar.plot.top - 22, laneBottom: bar.plot.bottom + 8, segments });
}

// ---- live batch view: hover ----------------------------------------------------------------

function ms(seconds) { return seconds === null ? "–" : (1000 * seconds).toFixed(3) + " ms"; }

function tooltipText(bar, hovered) {
  const step = bar.step;
  const prefills = step.requests.filter((r) => r.kind === "prefill").length;
  const lines = [
    "worker " + bar.worker + " · step " + step.step + " · " + step.num_tokens + " tokens (" +
      prefills + " prefill, " + (step.requests.length - prefills) + " decode)" +
      (step.graph_replayed ? " · graph replayed" : ""),
  ];
  for (const s of bar.segments) {
    lines.push((s === hovered ? "> " : "  ") + s.id + "  " + s.kind + " " + s.tokens +
               (s.tokens === 1 ? " token" : " tokens") + " at position " + s.start);
  }
  lines.push("device " + ms(step.device_s) + " · host " + ms(step.host_s) +
             " · round trip " + ms(step.round_trip_s));
  return lines.join("\n");
}

// The bar whose slot (the bar and the gap after it) holds x, in the lane that holds y.
function barAt(x, y) {
  return live.bars.find((b) => x >= b.x && x < b.x + b.slot &&
                                y >= b.laneTop && y <= b.laneBottom);
}

export function onHover(event) {
  const canvas = $("steps-canvas");
  const box = canvas.getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  const bar = barAt(x, y);
  const tooltip = $("tooltip");
  if (!bar) {
    tooltip.hidden = true;
    return;
  }
  const hovered = bar.segments.find((s) => y >= s.top && y <= s.bottom) || null;
  tooltip.textContent = tooltipText(bar, hovered);
  tooltip.hidden = false;
  // Beside the pointer, on whichever side has room, never over the bar it describes.
  const right = x + 14 + tooltip.offsetWidth <= box.width - 4;
  const left = right ? x + 14 : x - 14 - tooltip.offsetWidth;
  const below = y + 14 + tooltip.offsetHeight <= box.height - 4;
  const top = below ? y + 14 : y - 14 - tooltip.offsetHeight;
  tooltip.style.left = Math.max(4, left) + "px";
  tooltip.style.top = Math.max(4, top) + "px";
}

// While the pointer is on the chart it holds still (steps keep arriving and are drawn when the
// pointer leaves), so a bar can be read under load.
export function freeze(frozen) {
  live.frozen = frozen;
  $("pause-note").textContent = frozen ? "paused while the pointer is on the chart" : "";
  if (!frozen) scheduleDraw();
}

// What is drawn where (CSS pixels within the canvas) and what the view holds: for people poking
// at the page and for its browser test.
export const batchViewState = {
  bars: () => live.bars.map((b) => ({
    worker: b.worker, step: b.step.step, x: b.x + b.width / 2, top: b.top, bottom: b.bottom,
    kinds: [...new Set(b.segments.map((s) => s.kind))], ids: b.segments.map((s) => s.id),
  })),
  stepsHeld: () => [...live.steps.values()].reduce((n, steps) => n + steps.length, 0),
  frozen: () => live.frozen,
};
