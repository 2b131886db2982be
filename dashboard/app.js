// The CaptureFleet dashboard: plain JavaScript, no build step. Every action goes through
// /api/operator as an OperatorRequest in protobuf's JSON mapping (proto-docs/operator.proto),
// answered as the signed-in operator with the same roles and audit as the CLI.
"use strict";

const state = { session: null, devices: [], nodes: [], stats: {}, previewSeen: {}, events: [] };

async function call(body) {
  const response = await fetch("/api/operator", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CaptureFleet-CSRF": state.session.csrf_token },
    body: JSON.stringify(body),
  });
  const reply = await response.json();
  if (response.status === 401) { showProblem(reply.status.message); throw new Error(reply.status.message); }
  const code = reply.status && reply.status.code;
  if (code !== "STATUS_CODE_OK") throw new Error((reply.status && reply.status.message) || "refused");
  return reply;
}

function showProblem(message) {
  const problem = document.getElementById("problem");
  problem.textContent = message;
  problem.hidden = !message;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value; else if (key.startsWith("on")) node.addEventListener(key.slice(2), value); else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const consentName = (wire) => (wire || "CONSENT_STATE_NOT_DETERMINED").replace("CONSENT_STATE_", "").toLowerCase();
const levelName = (wire) => (wire || "PRESSURE_LEVEL_NOMINAL").replace("PRESSURE_LEVEL_", "").toLowerCase();
const canOperate = () => state.session && (state.session.role === "operator" || state.session.role === "admin");

function age(unixMs) {
  if (!unixMs || unixMs === "0") return "never";
  const seconds = Math.max(0, (Date.now() - Number(unixMs)) / 1000);
  return seconds < 60 ? `${seconds.toFixed(0)} s ago` : `${(seconds / 60).toFixed(0)} min ago`;
}

function tile(device) {
  const stats = state.stats[device.deviceId] || {};
  const consent = consentName(device.consent);
  const interruption = device.interruption && device.interruption.reason && device.interruption.reason !== "INTERRUPTION_REASON_NONE"
    ? device.interruption.reason.replace("INTERRUPTION_REASON_", "").toLowerCase() : null;
  const drops = stats.drops || {};
  const image = el("img", { alt: device.name || device.deviceId, "data-device": device.deviceId,
    onclick: () => { location.hash = `#camera/${encodeURIComponent(device.deviceId)}`; } });
  const seen = stats.lastPreviewUnixMs || "0";
  if (seen !== "0") image.src = `/api/previews/${encodeURIComponent(device.deviceId)}?at=${seen}`;
  const actions = el("div", { class: "actions" });
  if (canOperate() && consent !== "authorized") {
    actions.append(el("button", { type: "button", class: "grant", onclick: () => grant(device.deviceId) }, "Grant consent"));
  }
  return el("div", { class: "tile", id: `tile-${device.deviceId}`, "data-consent": consent },
    image,
    el("div", { class: "badges" },
      stats.recording || device.recording ? el("span", { class: "badge rec" }, "REC") : null,
      el("span", { class: `badge ${consent}` }, consent),
      interruption ? el("span", { class: "badge interrupted" }, interruption) : null,
      device.online ? null : el("span", { class: "badge interrupted" }, "offline")),
    el("div", { class: "caption" },
      el("div", { class: "name" }, device.name || device.deviceId),
      el("div", { class: "stats" },
        `${device.deviceId} · ${Number(device.activeFrameRate || 0).toFixed(0)} fps · drops late ${drops.late || 0}, ` +
        `buffers ${drops.outOfBuffers || 0}, gaps ${drops.discontinuity || 0} · preview ${age(seen)}`)),
    actions);
}

async function grant(deviceId) {
  try {
    await call({ lockDevice: { deviceId, seconds: 60 } });
    await call({ changeConsent: { deviceId, action: "CONSENT_ACTION_GRANT", reason: "granted from the dashboard" } });
    await call({ unlockDevice: { deviceId } });
    showProblem("");
    await refresh();
  } catch (error) { showProblem(`${deviceId}: ${error.message}`); }
}

function render() {
  const container = document.getElementById("nodes");
  const byNode = new Map();
  for (const device of state.devices) {
    if (!byNode.has(device.nodeId)) byNode.set(device.nodeId, []);
    byNode.get(device.nodeId).push(device);
  }
  const nodes = new Map(state.nodes.map((node) => [node.nodeId, node]));
  container.replaceChildren(...[...byNode.entries()].sort().map(([nodeId, devices]) => {
    const node = nodes.get(nodeId) || {};
    const status = state.nodeStats[nodeId] || {};
    const clock = node.clock || {};
    const level = levelName(status.pressureLevel);
    return el("section", { class: "node", "data-node": nodeId },
      el("h2", {}, node.name || nodeId,
        el("span", { class: "meta" }, `${node.online ? "online" : "offline"} · ${node.softwareVersion || ""}`),
        el("span", { class: `meta level-${level}` }, `pressure ${level}`),
        el("span", { class: "meta" }, `clock ${(clock.sync || "").replace("SYNC_", "").toLowerCase() || "not reported"}` +
          (clock.uncertaintyNs ? ` ±${(Number(clock.uncertaintyNs) / 1000).toFixed(1)} µs, ${Number(clock.driftPpm || 0).toFixed(2)} ppm` : ""))),
      el("div", { class: "grid" }, ...devices.sort((a, b) => a.deviceId.localeCompare(b.deviceId)).map(tile)));
  }));
  document.getElementById("summary").textContent =
    `${state.devices.length} cameras on ${byNode.size} nodes, ${state.devices.filter((d) => d.online).length} online`;
}

async function refresh() {
  const [devices, nodes, stats] = await Promise.all([call({ listDevices: {} }), call({ listNodes: {} }), call({ getFleetStats: {} })]);
  state.devices = devices.devices || [];
  state.nodes = nodes.nodes || [];
  state.stats = Object.fromEntries((stats.deviceStats || []).map((s) => [s.deviceId, s]));
  state.nodeStats = Object.fromEntries((stats.nodeStats || []).map((s) => [s.nodeId, s]));
  render();
}

async function refreshEvents() {
  const reply = await call({ getEvents: { limit: 200 } });
  const rows = (reply.events || []).slice().reverse().map((event) => el("tr", {},
    el("td", {}, new Date(Number(event.unixMs)).toLocaleTimeString()),
    el("td", {}, (event.kind || "").replace("EVENT_KIND_", "").toLowerCase()),
    el("td", {}, [event.nodeId, event.deviceId].filter(Boolean).join(" ")),
    el("td", {}, event.message || "")));
  document.querySelector("#events tbody").replaceChildren(...rows);
}

// The camera page: one device's state, its formats, and what an operator may change.
const cameraId = () => decodeURIComponent((location.hash.match(/^#camera\/(.+)$/) || [])[1] || "");

async function act(requests) {
  const deviceId = cameraId();
  try {
    for (const request of requests) await call(request);
    showProblem("");
  } catch (error) { showProblem(`${deviceId}: ${error.message}`); }
  await refreshCamera();
}

async function refreshCamera() {
  const deviceId = cameraId();
  if (!deviceId) return;
  const [detail, formats, stats] = await Promise.all([
    call({ getDevice: { deviceId } }), call({ getFormats: { deviceId } }), call({ getFleetStats: {} })]);
  const device = (detail.devices || [])[0] || {};
  const status = (stats.deviceStats || []).find((s) => s.deviceId === deviceId) || {};
  const seen = status.lastPreviewUnixMs || "0";
  const preview = document.getElementById("camera-preview");
  if (seen !== "0" && preview.dataset.seen !== seen) {
    preview.src = `/api/previews/${encodeURIComponent(deviceId)}?at=${seen}`;
    preview.dataset.seen = seen;
  }
  document.getElementById("camera-name").textContent = `${device.name || deviceId} (${deviceId})`;
  const zoom = Number(status.zoomFactor || device.zoomFactor || 1);
  const active = device.activeFormat || {};
  document.getElementById("camera-state").textContent =
    `${device.online ? "online" : "offline"} · consent ${consentName(device.consent)} · ${active.width}x${active.height} ${active.pixelFormat} ` +
    `at ${Number(device.activeFrameRate || 0).toFixed(1)} fps · zoom ${zoom.toFixed(2)}x` +
    (active.upscaleThresholdZoomFactor && zoom > Number(active.upscaleThresholdZoomFactor) ? " UPSCALED" : "") +
    (device.focus ? ` · focus ${(device.focus.mode || "").replace("FOCUS_MODE_", "").toLowerCase()} at ${Number(device.focus.lensPosition || 0).toFixed(2)}` : "");
  document.getElementById("camera-lease").textContent = device.leaseHolder
    ? `configuration lease: ${device.leaseHolder} until ${new Date(Number(device.leaseExpiresUnixMs)).toLocaleTimeString()}`
    : "configuration lease: nobody (take it to change the camera)";
  for (const control of document.querySelectorAll(".operate")) control.hidden = !canOperate();
  const rows = (formats.formats || []).map((format, index) => {
    const isActive = format.width === active.width && format.height === active.height && format.pixelFormat === active.pixelFormat;
    const rates = (format.frameRateRanges || []).map((r) => `${Number(r.minFps || 0)}-${Number(r.maxFps || 0)}`).join(", ");
    return el("tr", { class: isActive ? "active" : "" },
      el("td", {}, isActive ? "●" : ""),
      el("td", {}, `${format.width}x${format.height} ${format.pixelFormat}`),
      el("td", {}, rates),
      el("td", {}, format.fieldOfViewDegrees ? `${Number(format.fieldOfViewDegrees).toFixed(1)}°` : "-"),
      el("td", {}, `${Number(format.maxZoomFactor || 1)}x`),
      el("td", {}, canOperate() && !isActive
        ? el("button", { type: "button", onclick: () => act([{ changeFormat: { deviceId, formatIndex: index } }]) }, "Use") : null));
  });
  document.querySelector("#formats tbody").replaceChildren(...rows);
}

function wireCameraControls() {
  const value = (id) => Number(document.getElementById(id).value);
  const on = (id, requests) => document.getElementById(id).addEventListener("click", () => act(requests()));
  on("lease-take", () => [{ lockDevice: { deviceId: cameraId(), seconds: 300 } }]);
  on("lease-give", () => [{ unlockDevice: { deviceId: cameraId() } }]);
  on("zoom-set", () => [{ changeZoom: { deviceId: cameraId(), factor: value("zoom-factor"), rampRate: value("zoom-rate") } }]);
  on("zoom-cancel", () => [{ changeZoom: { deviceId: cameraId(), cancel: true } }]);
  on("focus-set", () => [{ changeFocus: { deviceId: cameraId(), mode: "FOCUS_MODE_LOCKED", lensPosition: value("focus-lens") } }]);
  on("focus-auto", () => [{ changeFocus: { deviceId: cameraId(), mode: "FOCUS_MODE_AUTO" } }]);
  on("rate-set", () => [{ changeFrameRate: { deviceId: cameraId(), framesPerSecond: value("frame-rate") } }]);
}

function showPage() {
  const page = (location.hash || "#fleet").slice(1).split("/")[0];
  for (const section of document.querySelectorAll(".page")) section.hidden = section.id !== `page-${page}`;
  for (const link of document.querySelectorAll("header nav a")) link.classList.toggle("active", link.dataset.page === page);
}

async function start() {
  const response = await fetch("/api/session");
  const body = await response.json();
  if (!response.ok) { showProblem(body.status.message); return; }
  state.session = body;
  document.getElementById("who").textContent = `${body.operator} (${body.role})`;
  document.getElementById("signout").addEventListener("click", async () => {
    await fetch("/api/signout", { method: "POST", headers: { "X-CaptureFleet-CSRF": state.session.csrf_token } });
    location.reload();
  });
  window.addEventListener("hashchange", showPage);
  wireCameraControls();
  showPage();
  const tick = async () => {
    try {
      if (location.hash === "#events") await refreshEvents();
      else if (cameraId()) await refreshCamera();
      else await refresh();
    } catch (error) { showProblem(error.message); }
    setTimeout(tick, 1000);
  };
  tick();
}

state.nodeStats = {};
start();
