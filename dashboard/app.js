// The CaptureFleet dashboard: plain JavaScript, no build step, nothing from the internet.
// What the fleet is comes over one WebSocket (/api/live): the whole fleet once, then what
// changed each second. Every action goes through /api/operator as an OperatorRequest in
// protobuf's JSON mapping (proto-docs/operator.proto), answered as the signed-in operator
// with the same roles and audit as the CLI.
"use strict";

const fleet = { devices: new Map(), device_stats: new Map(), nodes: new Map(), node_stats: new Map(), pressure: new Map() };
// `loaded`: the first fleet update has arrived (until then the page says it is loading, not
// "0 cameras"); `received`: this connection has had one (only then is it "live").
const state = { session: null, events: [], tiles: new Map(), sections: new Map(), selected: new Set(), visible: new Set(), connected: false,
  loaded: false, received: false, filter: "", takeFilter: "" };
const keyOf = { devices: "deviceId", device_stats: "deviceId", nodes: "nodeId", node_stats: "nodeId", pressure: "nodeId" };

// MARK: Talking to the coordinator

async function call(body) {
  const response = await fetch("/api/operator", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CaptureFleet-CSRF": state.session.csrf_token },
    body: JSON.stringify(body),
  });
  const reply = await response.json();
  const message = pageWords((reply.status && (reply.status.reason || reply.status.message)) || `refused (${response.status})`);
  if (response.status === 401) { signedOut(message); throw new Error(message); }
  if (!reply.status || reply.status.code !== "STATUS_CODE_OK") throw new Error(message);
  return reply;
}

function connect() {
  const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/live`);
  let signedOutReason = null;
  socket.addEventListener("open", () => { state.connected = true; state.received = false; showConnection(); });
  socket.addEventListener("message", (message) => {
    const update = JSON.parse(message.data);
    if (update.type === "signed_out") { signedOutReason = update.reason; return; }
    if (update.type !== "fleet") return;
    state.received = true;
    state.loaded = true;
    apply(update);
  });
  socket.addEventListener("close", () => {
    state.connected = false;
    state.received = false;
    showConnection();
    if (signedOutReason) { signedOut(signedOutReason); return; }
    setTimeout(connect, 2000);
  });
}

function apply(update) {
  if (update.whole) { for (const table of Object.values(fleet)) table.clear(); state.events = []; }
  for (const [table, entries] of Object.entries(update.changed || {})) {
    for (const entry of entries) fleet[table].set(entry[keyOf[table]], entry);
  }
  for (const [table, ids] of Object.entries(update.gone || {})) for (const id of ids) fleet[table].delete(id);
  if (update.events && update.events.length) {
    state.events.push(...update.events);
    if (state.events.length > 1000) state.events.splice(0, state.events.length - 1000);
  }
  scheduleRender();
}

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => { renderPending = false; render(); });
}

let renderedAt = 0;
function render() {
  renderedAt = Date.now();
  // Said here, with the fleet drawn in the same frame: never "live" over an empty page.
  showConnection();
  const page = currentPage();
  if (page === "fleet") renderFleet();
  else if (page === "camera") renderCamera();
  else if (page === "events") renderEvents();
  else if (page === "consent") renderConsent();
  else if (page === "takes") renderTakeCameras();
}

// MARK: Small helpers

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

function showProblem(message) {
  const problem = document.getElementById("problem");
  problem.textContent = message;
  problem.hidden = !message;
}

function signedOut(reason) {
  document.body.classList.add("signed-out");
  showProblem(`Signed out: ${reason}. Run \`capfleet dashboard login\` and open the link it prints.`);
}

// "live" only once this connection has brought the fleet: an open socket that has sent
// nothing yet is still connecting, and the page still shows what it had (or a loading note).
function showConnection() {
  const live = state.connected && state.received;
  const shown = document.getElementById("connection");
  setText(shown, live ? "live" : state.loaded ? "reconnecting…" : "connecting…");
  if (shown.className !== (live ? "live" : "stale")) shown.className = live ? "live" : "stale";
}

// Writes a text only when it differs (an unchanged write still restyles the element).
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// MARK: Naming and finding cameras

// Names sort as people read them: "camera 2" before "camera 10".
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
const nodeName = (nodeId) => (fleet.nodes.get(nodeId) || {}).name || nodeId || "?";
const cameraName = (device) => device.name || device.deviceId;
// Cameras of different nodes share names ("Synthetic camera 1"): a camera is named with its node.
const cameraLabel = (device) => `${nodeName(device.nodeId)} · ${cameraName(device)}`;
const byNodeThenCamera = (a, b) => collator.compare(nodeName(a.nodeId), nodeName(b.nodeId)) || collator.compare(a.nodeId, b.nodeId) ||
  collator.compare(cameraName(a), cameraName(b)) || collator.compare(a.deviceId, b.deviceId);
const sortedDevices = () => [...fleet.devices.values()].sort(byNodeThenCamera);
const consentOf = (device) => consentName((fleet.device_stats.get(device.deviceId) || {}).consent || device.consent);

// A filter is words, each of which must appear in the camera's node, name, device id or consent.
function matches(device, filter) {
  const words = filter.trim().toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const text = `${nodeName(device.nodeId)} ${device.nodeId} ${cameraName(device)} ${device.deviceId} ${consentOf(device)}`.toLowerCase();
  return words.every((word) => text.includes(word));
}

function select(deviceIds, selected) {
  for (const id of deviceIds) if (selected) state.selected.add(id); else state.selected.delete(id);
  scheduleRender();
}

// The coordinator's refusals are the CLI's too, so their advice names CLI commands; on the
// page the same advice points at the page's own controls, and a device is named as the page
// shows it (node, camera, device id).
const pageAdvice = [
  [/\(capfleet consent grant [^)]*\)/g, "(grant its consent: tick it on the Fleet page and press Grant consent, or Grant on the Consent page)"],
  [/lock it first \(capfleet lock [^)]*\)/g, "press Take the lease on its camera page first"],
  [/\(capfleet devices lists them\)/g, "(tick them in the list, or on the Fleet page)"],
  [/;? see capfleet devices/g, "; the Fleet page lists every camera"],
  [/;? see capfleet recordings list/g, "; the Takes page lists every take"],
  [/\(capfleet record stop [^)]*\)/g, "(Stop on the Takes page)"],
  [/\(capfleet recordings collect [^)]*\)/g, "(Collect on the Takes page)"],
  [/\(capfleet watch\)/g, "(its tile on the Fleet page shows its frame rate and last frame)"],
  [/say why with --reason/g, "say why in the reason box"],
];

function pageWords(message) {
  let text = message;
  for (const [pattern, words] of pageAdvice) text = text.replace(pattern, words);
  return text.replace(/\bdevice ([A-Za-z0-9_-][A-Za-z0-9._:-]*[A-Za-z0-9_-])/g, (whole, id) => {
    const device = fleet.devices.get(id);
    return device ? `camera ${cameraLabel(device)} (${id})` : whole;
  });
}

const wireName = (value, prefix, fallback = "") => (value || fallback).replace(prefix, "").toLowerCase().replaceAll("_", " ");
const consentName = (wire) => wireName(wire, "CONSENT_STATE_", "CONSENT_STATE_NOT_DETERMINED");
const levelName = (wire) => wireName(wire, "PRESSURE_LEVEL_", "PRESSURE_LEVEL_UNSPECIFIED");
const canOperate = () => state.session && (state.session.role === "operator" || state.session.role === "admin");
const isAdmin = () => state.session && state.session.role === "admin";
const number = (value) => Number(value || 0);

function age(unixMs) {
  if (!unixMs || unixMs === "0") return "never";
  const seconds = Math.max(0, (Date.now() - Number(unixMs)) / 1000);
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  return seconds < 120 ? `${seconds.toFixed(0)} s` : `${(seconds / 60).toFixed(0)} min`;
}

// A tile's last-frame age: "< 2 s" while the camera delivers (the fleet's update comes once a
// second), so its text, and the tile's layout, change only when something is wrong.
function frameAge(unixMs) {
  return unixMs && unixMs !== "0" && Date.now() - Number(unixMs) < 2000 ? "< 2 s" : age(unixMs);
}

function interruptionOf(device, stats) {
  const interruption = (stats && stats.interruption) || device.interruption || {};
  const reason = interruption.reason;
  return reason && reason !== "INTERRUPTION_REASON_NONE" ? wireName(reason, "INTERRUPTION_REASON_") : null;
}

function previewURL(deviceId, stats) {
  const seen = (stats && stats.lastPreviewUnixMs) || "0";
  return seen === "0" ? null : `/api/previews/${encodeURIComponent(deviceId)}?at=${seen}`;
}

const currentPage = () => (location.hash || "#fleet").slice(1).split("/")[0] || "fleet";
const cameraId = () => decodeURIComponent((location.hash.match(/^#camera\/(.+)$/) || [])[1] || "");

// MARK: The fleet page: one tile per camera, kept and updated in place

// Only tiles on screen load their previews: a 200-camera grid fetches what is seen.
const onScreen = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    const id = entry.target.dataset.device;
    if (entry.isIntersecting) state.visible.add(id); else state.visible.delete(id);
  }
  scheduleRender();
});

function makeTile(deviceId) {
  const image = el("img", { alt: deviceId, decoding: "async", onclick: () => { location.hash = `#camera/${encodeURIComponent(deviceId)}`; } });
  const badges = el("div", { class: "badges" });
  const node = el("span", { class: "node-name" });
  const name = el("span", { class: "name" });
  const id = el("div", { class: "device-id" }, deviceId);
  const line = el("div", { class: "stats" });
  const drops = el("div", { class: "stats drops" });
  const box = el("input", { type: "checkbox", class: "select operate", title: "select (for a take or a consent change)",
    onchange: (event) => select([deviceId], event.target.checked) });
  const root = el("div", { class: "tile", "data-device": deviceId }, image, badges,
    el("div", { class: "caption" }, el("div", { class: "title" }, box, el("span", {}, node, el("span", { class: "dot" }, " · "), name)), id, line, drops));
  onScreen.observe(root);
  const tile = { root, image, badges, node, name, line, drops, select: box, shown: new Map(), wanted: null, loading: 0, shownAt: 0 };
  image.addEventListener("load", () => previewDone(tile));
  image.addEventListener("error", () => previewDone(tile));
  return tile;
}

// MARK: Previews, loaded at a pace the page can keep

// Every visible tile's newest preview is loaded, the longest-waiting first, at most
// `pace.perSecond` a second and `paceLimits.inFlight` at once, by a timer (an animation-frame
// loop would make the page draw sixty frames a second for nothing). Loaded all at once when the
// fleet's update arrives, a grid's pictures came in a burst that held the page up for a tenth of
// a second and more; paced, they are spread over the second. The pace grows while there are
// more previews to show than it allows and the page has no long tasks (50 ms and more), and
// shrinks when it has, so a wall of hundreds of pictures on a slow machine shows each a little
// less often instead of stuttering. The fleet summary says when previews are paced.
const paceLimits = { least: 10, most: 500, slowestSeconds: 5, inFlight: 6, tickMs: 100, stuckMs: 10000 };
const pace = { perSecond: 60, tokens: 0, timer: null, lastTick: 0, secondStart: 0, longTasks: 0, starved: false,
  inFlight: 0, shown: 0 };
const waiting = new Set();
if (window.PerformanceObserver && PerformanceObserver.supportedEntryTypes.includes("longtask")) {
  new PerformanceObserver((list) => { pace.longTasks += list.getEntries().length; }).observe({ type: "longtask" });
}

function wantPreview(tile, url) {
  if (tile.wanted === url || (!tile.loading && tile.image.getAttribute("src") === url)) return;
  tile.wanted = url;
  waiting.add(tile);
  if (!pace.timer) { pace.lastTick = performance.now(); pace.timer = setTimeout(pacePreviews, 0); }
}

function previewDone(tile) {
  if (!tile.loading) return;
  tile.loading = 0;
  pace.inFlight = Math.max(0, pace.inFlight - 1);
  pace.shown += 1;
  // The next one at once, not at the next tick: six loads at a time, started only every tick,
  // would cap the pace at sixty a second however fast the browser and coordinator are.
  startPreviews(performance.now());
}

function pacePreviews() {
  const now = performance.now();
  if (now - pace.secondStart >= 1000) {
    // Never so slow that a visible tile waits more than `slowestSeconds` for its picture.
    const least = Math.max(paceLimits.least, state.visible.size / paceLimits.slowestSeconds);
    if (pace.longTasks > 0) pace.perSecond = Math.max(least, Math.round(pace.perSecond * 0.8));
    else if (pace.starved) pace.perSecond = Math.min(paceLimits.most, pace.perSecond + 10);
    pace.secondStart = now; pace.longTasks = 0; pace.starved = false;
  }
  pace.tokens = Math.min(Math.max(1, pace.perSecond * paceLimits.tickMs / 1000),
    pace.tokens + pace.perSecond * Math.min(now - pace.lastTick, 1000) / 1000);
  pace.lastTick = now;
  for (const tile of state.tiles.values()) {
    // A load the browser never finished (a dropped connection) frees its place.
    if (tile.loading && now - tile.loading > paceLimits.stuckMs) previewDone(tile);
  }
  startPreviews(now);
  pace.timer = waiting.size || pace.inFlight ? setTimeout(pacePreviews, paceLimits.tickMs) : null;
}

function startPreviews(now) {
  if (!waiting.size) return;
  const ready = [...waiting].filter((tile) => {
    if (state.visible.has(tile.root.dataset.device)) return true;
    waiting.delete(tile);
    tile.wanted = null;  // scrolled away: asked for again when seen
    return false;
  }).sort((a, b) => a.shownAt - b.shownAt);
  for (const tile of ready) {
    if (tile.loading) continue;
    if (pace.tokens < 1 || pace.inFlight >= paceLimits.inFlight) { pace.starved = true; break; }
    waiting.delete(tile);
    pace.tokens -= 1;
    pace.inFlight += 1;
    tile.loading = now;
    tile.shownAt = now;
    tile.image.src = tile.wanted;
  }
}

// Writes only what changed: setting a text or a class to what it already is still makes the
// browser restyle and lay the tile out again, a hundred times a second on a big grid.
function put(tile, key, value, write) {
  if (tile.shown.get(key) === value) return;
  tile.shown.set(key, value);
  write(value);
}

function updateTile(tile, device, stats, shown) {
  const id = device.deviceId;
  put(tile, "hidden", !shown, (value) => { tile.root.hidden = value; });
  const consent = consentName((stats && stats.consent) || device.consent);
  const interruption = interruptionOf(device, stats);
  const online = stats ? stats.online !== false && device.online : device.online;
  const recording = Boolean((stats && stats.recording) || device.recording);
  put(tile, "consent", consent, (value) => { tile.root.dataset.consent = value.replaceAll(" ", "-"); });
  put(tile, "offline", !online, (value) => tile.root.classList.toggle("offline", value));
  put(tile, "name", cameraName(device), (value) => { tile.name.textContent = value; });
  put(tile, "node", nodeName(device.nodeId), (value) => { tile.node.textContent = value; });
  put(tile, "label", `${cameraLabel(device)} (${id})`, (value) => { tile.root.title = value; tile.image.alt = value; });
  put(tile, "selectable", canOperate(), (value) => { tile.select.hidden = !value; });
  put(tile, "selected", state.selected.has(id), (value) => { tile.select.checked = value; });
  put(tile, "badges", `${recording}|${consent}|${interruption}|${online}`, () => {
    tile.badges.replaceChildren(...[
      recording ? el("span", { class: "badge rec" }, "REC") : null,
      el("span", { class: `badge consent-${consent.replaceAll(" ", "-")}` }, consent),
      interruption ? el("span", { class: "badge interrupted" }, interruption) : null,
      online ? null : el("span", { class: "badge interrupted" }, "offline"),
    ].filter(Boolean));
  });
  // What moves every second (rates, ages, the picture) is written only where it is seen; a
  // tile scrolled into view is brought up to date at once (the observer asks for a render).
  if (!state.visible.has(id)) return;
  // A sensor stream has samples, not frames or previews (proto-docs/sensors.md).
  if ((device.kind || (stats && stats.kind)) === "SOURCE_KIND_SENSOR") {
    const refused = number(stats && stats.samplesRefused);
    put(tile, "line", `sensor stream · ${number(stats && stats.samplesReceived)} samples${refused ? ` · ${refused} refused` : ""}`,
      (value) => { tile.line.textContent = value; });
    put(tile, "drops", "no frames: its readings go to telemetry and takes", (value) => { tile.drops.textContent = value; });
    return;
  }
  // A microphone has meters, not frames (proto-docs/microphones.md, "Levels"): one bar per
  // channel from -60 to 0 dBFS, its RMS filled and its peak marked, and its clock's rate.
  const kind = device.kind || (stats && stats.kind);
  if (kind === "SOURCE_KIND_SYNTHETIC_MICROPHONE" || kind === "SOURCE_KIND_ALSA") {
    const levels = (stats && stats.audioLevels) || [];
    const clock = (stats && stats.audioClock) || {};
    const clipped = levels.reduce((sum, level) => sum + number(level.clipped), 0);
    put(tile, "line", `microphone · ${levels.map((l) => `${number(l.peakDbfs).toFixed(1)}/${number(l.rmsDbfs).toFixed(1)}`).join(" ") || "no levels yet"} dBFS` +
      (clock.rateMeasured ? ` · ${number(clock.ratePpm) >= 0 ? "+" : ""}${number(clock.ratePpm).toFixed(1)} ppm` : "") +
      (clipped ? ` · ${clipped} clipped` : ""), (value) => { tile.line.textContent = value; });
    const scale = (dbfs) => Math.max(0, Math.min(100, (number(dbfs) + 60) / 60 * 100)).toFixed(1);
    put(tile, "meters", levels.map((l) => `${scale(l.rmsDbfs)}|${scale(l.peakDbfs)}`).join(","), () => {
      tile.drops.replaceChildren(...levels.map((level) => el("div", { class: "meter", title: `peak ${number(level.peakDbfs).toFixed(1)} dBFS, RMS ${number(level.rmsDbfs).toFixed(1)} dBFS` },
        el("span", { class: "rms", style: `width: ${scale(level.rmsDbfs)}%` }),
        el("span", { class: "peak", style: `left: ${scale(level.peakDbfs)}%` }))));
    });
    put(tile, "some drops", levels.length > 0, (value) => tile.drops.classList.toggle("some", value));
    return;
  }
  const fps = stats ? number(stats.framesPerSecond || stats.activeFrameRate) : 0;
  put(tile, "line", `${fps.toFixed(1)} fps · last frame ${frameAge(stats && stats.lastFrameUnixMs)}`,
    (value) => { tile.line.textContent = value; });
  const drops = (stats && stats.drops) || {};
  const some = number(drops.late) + number(drops.outOfBuffers) + number(drops.discontinuity) + number(drops.encoderLate) > 0;
  put(tile, "some drops", some, (value) => tile.drops.classList.toggle("some", value));
  put(tile, "drops", `drops: late ${number(drops.late)} · out of buffers ${number(drops.outOfBuffers)} · ` +
    `discontinuity ${number(drops.discontinuity)} · encoder late ${number(drops.encoderLate)}`, (value) => { tile.drops.textContent = value; });
  const url = previewURL(id, stats);
  if (url) wantPreview(tile, url);
}

function nodeHeader(nodeId) {
  const node = fleet.nodes.get(nodeId) || {};
  const status = fleet.node_stats.get(nodeId) || {};
  const pressure = fleet.pressure.get(nodeId) || {};
  const clock = status.clock || node.clock || {};
  const level = levelName(status.pressureLevel || pressure.level);
  const factors = (status.pressureFactors || pressure.factors || []).map((f) => `${f.factor} ${levelName(f.level)}`).join(", ");
  const sync = wireName(clock.sync, "SYNC_", "");
  return {
    name: node.name || nodeId, online: Boolean(node.online), version: node.softwareVersion || "", level,
    pressure: `pressure ${level}${factors ? ` (${factors})` : ""}`,
    clock: `clock ${sync || "not reported"}` +
      (clock.uncertaintyNs ? ` ±${(number(clock.uncertaintyNs) / 1000).toFixed(1)} µs` : "") +
      (clock.sync ? `, drift ${number(clock.driftPpm).toFixed(2)} ppm` : ""),
  };
}

function headerParts(header) {
  return [
    header.name,
    el("span", { class: `meta ${header.online ? "online" : "offline"}` }, header.online ? "online" : "offline"),
    el("span", { class: "meta" }, header.version),
    el("span", { class: `meta level-${header.level}` }, header.pressure),
    el("span", { class: "meta" }, header.clock),
  ];
}

function renderFleet() {
  const container = document.getElementById("nodes");
  const summaryLine = document.getElementById("summary");
  if (!state.loaded) { setText(summaryLine, "Loading the fleet…"); return; }
  container.querySelector(":scope > .loading")?.remove();
  const byNode = new Map();
  for (const device of sortedDevices()) {
    if (!byNode.has(device.nodeId)) byNode.set(device.nodeId, []);
    byNode.get(device.nodeId).push(device);
  }
  for (const nodeId of fleet.nodes.keys()) if (!byNode.has(nodeId)) byNode.set(nodeId, []);
  const order = [...byNode.keys()].sort((a, b) => collator.compare(nodeName(a), nodeName(b)) || collator.compare(a, b));
  let shownCount = 0;
  for (const nodeId of order) {
    let section = state.sections.get(nodeId);
    if (!section) {
      const pick = el("input", { type: "checkbox", class: "node-select operate", title: "select this node's cameras (those the filter shows)",
        onchange: (event) => select(section.shown, event.target.checked) });
      const title = el("span", { class: "node-title" });
      const heading = el("h2", {}, pick, title);
      const grid = el("div", { class: "grid" });
      section = { root: el("section", { class: "node", "data-node": nodeId }, heading, grid), title, pick, grid, headerText: "", shown: [] };
      state.sections.set(nodeId, section);
    }
    const header = nodeHeader(nodeId);
    const text = JSON.stringify(header);
    if (text !== section.headerText) { section.title.replaceChildren(...headerParts(header)); section.headerText = text; }
    const devices = byNode.get(nodeId);
    section.shown = devices.filter((device) => matches(device, state.filter)).map((device) => device.deviceId);
    const shown = new Set(section.shown);
    shownCount += shown.size;
    const hidden = Boolean(state.filter.trim()) && !shown.size;
    if (section.root.hidden !== hidden) section.root.hidden = hidden;
    const picked = section.shown.filter((id) => state.selected.has(id)).length;
    section.pick.checked = picked > 0 && picked === shown.size;
    section.pick.indeterminate = picked > 0 && picked < shown.size;
    section.pick.disabled = !shown.size;
    const wanted = devices.map((device) => {
      let tile = state.tiles.get(device.deviceId);
      if (!tile) { tile = makeTile(device.deviceId); state.tiles.set(device.deviceId, tile); }
      updateTile(tile, device, fleet.device_stats.get(device.deviceId), shown.has(device.deviceId));
      return tile.root;
    });
    if (wanted.length !== section.grid.children.length || wanted.some((node, index) => section.grid.children[index] !== node)) {
      section.grid.replaceChildren(...wanted);
    }
  }
  for (const [id, tile] of state.tiles) if (!fleet.devices.has(id)) { onScreen.unobserve(tile.root); tile.root.remove(); state.tiles.delete(id); }
  for (const [id, section] of state.sections) if (!byNode.has(id)) { section.root.remove(); state.sections.delete(id); }
  const roots = order.map((id) => state.sections.get(id).root);
  if (roots.length !== container.children.length || roots.some((node, index) => container.children[index] !== node)) container.replaceChildren(...roots);
  const online = [...fleet.devices.values()].filter((d) => d.online).length;
  const recording = [...fleet.device_stats.values()].filter((s) => s.recording).length;
  const paced = state.visible.size > pace.perSecond
    ? ` · previews every ${Math.ceil(state.visible.size / pace.perSecond)} s (paced to keep this page smooth)` : "";
  const filtered = state.filter.trim() ? ` · the filter shows ${shownCount}` : "";
  const summary = byNode.size
    ? `${fleet.devices.size} cameras on ${byNode.size} nodes · ${online} online · ${recording} recording${filtered}${paced}`
    : "No node has registered yet: cameras appear here as their agents connect.";
  setText(summaryLine, summary);
  const selected = [...state.selected].filter((id) => fleet.devices.has(id));
  const unseen = selected.filter((id) => !matches(fleet.devices.get(id), state.filter)).length;
  setText(document.getElementById("selection-count"),
    selected.length ? `${selected.length} selected${unseen ? ` (${unseen} not shown by the filter)` : ""}` : "none selected");
}

// Consent for every selected camera, one request each through the operator door (as
// `capfleet consent` would send them), a few at a time; each camera's answer is listed.
async function bulkConsent(action) {
  const reason = document.getElementById("bulk-reason").value;
  const devices = sortedDevices().filter((device) => state.selected.has(device.deviceId));
  if (!devices.length) { showProblem("Select cameras first: tick their boxes, a node's box, or Select all shown."); return; }
  if (!reason.trim()) { showProblem("Say why in the reason box beside Grant consent: the consent history keeps a reason with every change."); return; }
  showProblem("");
  const verb = action === "grant" ? "Grant consent" : "Revoke consent";
  const items = new Map(devices.map((device) => [device.deviceId,
    el("li", { "data-device": device.deviceId, class: "pending" }, `${cameraLabel(device)} (${device.deviceId}): asking…`)]));
  document.querySelector("#bulk-results ul").replaceChildren(...items.values());
  document.getElementById("bulk-results").hidden = false;
  let answered = 0, refused = 0;
  const title = () => setText(document.getElementById("bulk-title"),
    `${verb}: ${answered} of ${devices.length} answered${refused ? `, ${refused} refused` : ""}${answered === devices.length ? "" : "…"}`);
  title();
  const queue = devices.slice();
  const worker = async () => {
    for (let device = queue.shift(); device; device = queue.shift()) {
      const item = items.get(device.deviceId);
      try {
        const reply = await call({ changeConsent: { deviceId: device.deviceId, action: `CONSENT_ACTION_${action.toUpperCase()}`, reason } });
        const record = (reply.consentHistory || [])[0] || {};
        item.className = "ok";
        item.textContent = `${cameraLabel(device)} (${device.deviceId}): ${consentName(record.fromState)} → ${consentName(record.toState)}` +
          (reply.consentApplied ? "" : " (recorded; its agent has not confirmed it yet)");
      } catch (error) {
        refused += 1;
        item.className = "refused";
        item.textContent = `${cameraLabel(device)} (${device.deviceId}): refused: ${error.message}`;
      }
      answered += 1;
      title();
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, devices.length) }, worker));
  consentHistory.loaded = 0;
}

function wireFleetControls() {
  const filter = document.getElementById("fleet-filter");
  filter.addEventListener("input", () => { state.filter = filter.value; scheduleRender(); });
  const size = document.getElementById("tile-size");
  size.value = localStorage.getItem("capfleet.tileSize") || "medium";
  document.getElementById("nodes").dataset.tileSize = size.value;
  size.addEventListener("change", () => {
    document.getElementById("nodes").dataset.tileSize = size.value;
    localStorage.setItem("capfleet.tileSize", size.value);
  });
  document.getElementById("select-shown").addEventListener("click", () =>
    select([...fleet.devices.values()].filter((device) => matches(device, state.filter)).map((device) => device.deviceId), true));
  document.getElementById("select-none").addEventListener("click", () => select([...state.selected], false));
  document.getElementById("bulk-grant").addEventListener("click", () => bulkConsent("grant"));
  document.getElementById("bulk-revoke").addEventListener("click", () => bulkConsent("revoke"));
  document.getElementById("bulk-close").addEventListener("click", () => { document.getElementById("bulk-results").hidden = true; });
}

// MARK: The camera page

let cameraDetail = { id: "", formats: [], device: {}, history: [], loaded: 0 };

async function loadCamera(force = false) {
  const deviceId = cameraId();
  if (!deviceId || (!force && cameraDetail.id === deviceId && Date.now() - cameraDetail.loaded < 5000)) return;
  try {
    const [detail, formats, history] = await Promise.all([
      call({ getDevice: { deviceId } }), call({ getFormats: { deviceId } }), call({ getConsentHistory: { deviceId } })]);
    cameraDetail = { id: deviceId, device: (detail.devices || [])[0] || {}, formats: formats.formats || [], history: history.consentHistory || [], loaded: Date.now() };
    renderCamera();
  } catch (error) { showProblem(`${deviceId}: ${error.message}`); }
}

async function act(requests, after = () => loadCamera(true)) {
  try {
    for (const request of requests) await call(request);
    showProblem("");
  } catch (error) { showProblem(error.message); }
  await after();
}

// "aligned (steered): |phase| median 8.2 µs, p99 14.1 µs over 1500 frames" or why not
// (proto-docs/clock.md, "Frame alignment").
const micro = (ns) => `${(number(ns) / 1000).toFixed(1)} µs`;
function alignmentText(alignment) {
  if (!alignment || !alignment.state || alignment.state === "STATE_OFF") return "Alignment: off";
  const how = alignment.steered ? "steered" : "free-running";
  const figures = number(alignment.phaseFrames) > 0
    ? `: |phase| median ${micro(alignment.phaseMedianNs)}, p99 ${micro(alignment.phaseP99Ns)} over ${number(alignment.phaseFrames)} frames` +
      (alignment.steered ? "" : `, drifting ${micro(alignment.driftNsPerS)}/s`)
    : `: latest frame ${micro(alignment.phaseNs)} from its slot`;
  return `Alignment: ${wireName(alignment.state, "STATE_")} (${how})${figures}` +
    (alignment.notAlignedReason ? ` — ${alignment.notAlignedReason}` : "");
}

// A GenICam camera's region of interest: the window of its sensor the active format reads
// (proto-docs/commands.md, "Region of interest").
function regionText(region) {
  if (!region || !number(region.width)) return "";
  return ` · region ${number(region.width)}x${number(region.height)} at ${number(region.left)},${number(region.top)}`;
}

function renderCamera() {
  const deviceId = cameraId();
  if (!deviceId) return;
  loadCamera();
  const device = { ...cameraDetail.device, ...(fleet.devices.get(deviceId) || {}) };
  const stats = fleet.device_stats.get(deviceId) || {};
  const preview = document.getElementById("camera-preview");
  const url = previewURL(deviceId, stats);
  if (!liveView.active && url && preview.dataset.src !== url) { preview.src = url; preview.dataset.src = url; }
  document.getElementById("camera-name").textContent = `${device.nodeId ? cameraLabel(device) : cameraName(device)} (${deviceId})`;
  const zoom = number(stats.zoomFactor || device.zoomFactor || 1);
  const active = device.activeFormat || {};
  const interruption = interruptionOf(device, stats);
  const threshold = number(active.upscaleThresholdZoomFactor);
  document.getElementById("camera-state").textContent =
    `${device.online ? "online" : "offline"}${interruption ? ` (${interruption})` : ""} · node ${device.nodeId || "?"} · ` +
    `${active.width || "?"}x${active.height || "?"} ${active.pixelFormat || ""} at ${number(stats.activeFrameRate || device.activeFrameRate).toFixed(1)} fps · ` +
    `zoom ${zoom.toFixed(2)}x${threshold && zoom > threshold ? " UPSCALED" : ""}` +
    ((stats.focus || device.focus) ? ` · focus ${wireName((stats.focus || device.focus).mode, "FOCUS_MODE_")} at ${number((stats.focus || device.focus).lensPosition).toFixed(2)}` : "") +
    regionText(stats.region || device.region) +
    ` · last frame ${age(stats.lastFrameUnixMs)}`;
  setText(document.getElementById("camera-alignment"), alignmentText(stats.alignment || device.alignment));
  document.getElementById("camera-zoom").textContent = `${zoom.toFixed(2)}x${threshold && zoom > threshold ? " UPSCALED" : ""}`;
  // The range the active format allows (the coordinator refuses the rest, saying so).
  const maxZoom = Math.max(1, number(active.maxZoomFactor || 1));
  const zoomInput = document.getElementById("zoom-factor");
  if (zoomInput.max !== String(maxZoom)) zoomInput.max = String(maxZoom);
  setText(document.getElementById("zoom-range"), maxZoom > 1
    ? `(1x–${maxZoom}x${threshold > 1 && threshold < maxZoom ? `; past ${Number(threshold.toFixed(2))}x the picture is upscaled` : ""})`
    : "(this format does not zoom: 1x only)");
  renderLease(deviceId);
  const consent = consentName(stats.consent || device.consent);
  document.getElementById("camera-consent").textContent = `Consent: ${consent}${device.consentReason ? ` (${device.consentReason})` : ""}`;
  const rows = cameraDetail.formats.map((format, index) => {
    const isActive = format.width === active.width && format.height === active.height && format.pixelFormat === active.pixelFormat;
    const rates = (format.frameRateRanges || []).map((r) => `${number(r.minFps)}-${number(r.maxFps)}`).join(", ");
    return el("tr", { class: isActive ? "active" : "" },
      el("td", {}, isActive ? "●" : ""),
      el("td", {}, `${format.width}x${format.height} ${format.pixelFormat}`),
      el("td", {}, rates),
      el("td", {}, format.fieldOfViewDegrees ? `${number(format.fieldOfViewDegrees).toFixed(1)}°` : "-"),
      el("td", {}, `${number(format.maxZoomFactor || 1)}x`),
      el("td", {}, canOperate() && !isActive
        ? el("button", { type: "button", class: "operate", onclick: () => act([{ changeFormat: { deviceId, formatIndex: index } }]) }, "Use") : null));
  });
  if (cameraDetail.id === deviceId) document.querySelector("#formats tbody").replaceChildren(...rows);
  document.querySelector("#consent-history tbody").replaceChildren(...historyRows(cameraDetail.id === deviceId ? cameraDetail.history : []));
}

// The lease as the fleet's update has it now (a lease given back or expired is absent there,
// and the camera's detail, read less often, would still show it); its buttons by who holds it.
function renderLease(deviceId) {
  const live = fleet.devices.get(deviceId);
  const lease = live || cameraDetail.device;
  const holder = lease.leaseHolder || "";
  const until = new Date(Number(lease.leaseExpiresUnixMs || 0)).toLocaleTimeString();
  const mine = Boolean(holder) && state.session && holder === `${state.session.operator} via dashboard`;
  const take = document.getElementById("lease-take");
  take.hidden = Boolean(holder) && !mine;
  setText(take, mine ? "Keep it 5 more minutes" : "Take the lease");
  document.getElementById("lease-give").hidden = !mine;
  setText(document.getElementById("camera-lease"), !holder
    ? "Configuration lease: nobody holds it. Take the lease to change the camera (for 5 minutes, or until you give it back)."
    : mine ? `Configuration lease: yours (${holder}) until ${until}. Give it back when you are done.`
      : `Configuration lease: held by ${holder} until ${until}; the camera can be changed once they give it back or it expires.`);
}

function historyRows(history) {
  return history.slice().reverse().map((record) => el("tr", {},
    el("td", {}, new Date(Number(record.unixMs)).toLocaleString()),
    el("td", {}, record.deviceId || ""),
    el("td", {}, wireName(record.action, "CONSENT_ACTION_")),
    el("td", {}, `${consentName(record.fromState)} → ${consentName(record.toState)}`),
    el("td", {}, record.actor || ""),
    el("td", {}, record.reason || "")));
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
  for (const action of ["grant", "deny", "revoke", "restrict"]) {
    document.getElementById(`camera-consent-${action}`).addEventListener("click", () =>
      changeConsent([cameraId()], action, document.getElementById("camera-consent-reason").value, () => loadCamera(true)));
  }
  document.getElementById("live-toggle").addEventListener("click", () => (liveView.active ? stopLiveView() : startLiveView()));
}

// The full-rate live view: an MJPEG stream the coordinator serves while the page shows it;
// closing it (or leaving the page) lets the camera's full-rate flow sleep again.
const liveView = { active: false };

function startLiveView() {
  const deviceId = cameraId();
  const preview = document.getElementById("camera-preview");
  liveView.active = true;
  preview.src = `/api/view/${encodeURIComponent(deviceId)}?at=${Date.now()}`;
  preview.dataset.src = "";
  document.getElementById("live-toggle").textContent = "Back to the preview";
  document.getElementById("live-state").textContent = "full-rate live view";
}

function stopLiveView() {
  const preview = document.getElementById("camera-preview");
  liveView.active = false;
  preview.removeAttribute("src");
  preview.dataset.src = "";
  document.getElementById("live-toggle").textContent = "Full-rate live view";
  document.getElementById("live-state").textContent = "preview, one frame a second";
  renderCamera();
}

// MARK: Consent

async function changeConsent(deviceIds, action, reason, after) {
  if (!reason || !reason.trim()) { showProblem("Say why: the consent history keeps a reason with every change."); return; }
  const requests = deviceIds.map((deviceId) => ({ changeConsent: { deviceId, action: `CONSENT_ACTION_${action.toUpperCase()}`, reason } }));
  await act(requests, after);
}

let consentHistory = { loaded: 0, records: [] };

async function loadConsentHistory() {
  if (Date.now() - consentHistory.loaded < 5000) return;
  consentHistory.loaded = Date.now();
  try {
    const ids = [...fleet.devices.keys()];
    const replies = await Promise.all(ids.map((deviceId) => call({ getConsentHistory: { deviceId } })));
    consentHistory.records = replies.flatMap((reply, index) => (reply.consentHistory || []).map((r) => ({ ...r, deviceId: r.deviceId || ids[index] })))
      .sort((a, b) => Number(a.unixMs) - Number(b.unixMs));
    renderConsent();
  } catch (error) { showProblem(error.message); }
}

function renderConsent() {
  loadConsentHistory();
  const rows = sortedDevices().map((device) => {
    const stats = fleet.device_stats.get(device.deviceId) || {};
    const consent = consentName(stats.consent || device.consent);
    const reasonInput = el("input", { type: "text", placeholder: "reason", class: "reason" });
    const button = (action) => el("button", { type: "button", class: `operate consent-${action}`,
      onclick: () => changeConsent([device.deviceId], action, reasonInput.value, () => { consentHistory.loaded = 0; return loadConsentHistory(); }) }, action);
    return el("tr", { "data-device": device.deviceId },
      el("td", {}, nodeName(device.nodeId)),
      el("td", {}, cameraName(device)),
      el("td", { class: "device-id" }, device.deviceId),
      el("td", { class: `consent-${consent.replaceAll(" ", "-")}` }, consent),
      el("td", {}, device.consentReason || ""),
      el("td", {}, canOperate() ? reasonInput : null,
        canOperate() ? button("grant") : null, canOperate() ? button("deny") : null, canOperate() ? button("revoke") : null,
        isAdmin() ? button("restrict") : null));
  });
  document.querySelector("#consent-devices tbody").replaceChildren(...rows);
  document.querySelector("#consent-all-history tbody").replaceChildren(...historyRows(consentHistory.records));
}

// MARK: Takes

let takes = { loaded: 0, list: [], shown: null, verification: [], destinations: [] };

// The picker: every camera with its node, device id and consent (a take refuses a camera
// without it), filtered and selected like the fleet page's grid; the selection is the same.
function renderTakeCameras() {
  if (Date.now() - takes.loaded > 2000) loadTakes();
  if (!state.loaded) return;
  const body = document.querySelector("#take-cameras tbody");
  const devices = sortedDevices();
  const key = devices.map((device) => device.deviceId).join(" ");
  if (body.dataset.key !== key) {
    body.replaceChildren(...devices.map((device) => {
      const box = el("input", { type: "checkbox", value: device.deviceId, onchange: (event) => select([device.deviceId], event.target.checked) });
      // The whole row picks the camera, not just its small box.
      const row = el("tr", { "data-device": device.deviceId, onclick: (event) => { if (event.target !== box) { box.checked = !box.checked; select([device.deviceId], box.checked); } } },
        el("td", {}, box), el("td", { class: "node" }), el("td", { class: "camera" }), el("td", { class: "device-id" }, device.deviceId), el("td", { class: "consent" }));
      return row;
    }));
    body.dataset.key = key;
  }
  let unconsented = 0;
  for (const row of body.rows) {
    const device = fleet.devices.get(row.dataset.device);
    if (!device) continue;
    const consent = consentOf(device);
    const [boxCell, nodeCell, cameraCell, , consentCell] = row.cells;
    setText(nodeCell, nodeName(device.nodeId));
    setText(cameraCell, cameraName(device));
    setText(consentCell, consent === "authorized" ? consent : `${consent}: not recorded until granted`);
    consentCell.className = `consent consent-${consent.replaceAll(" ", "-")}`;
    const hidden = !matches(device, state.takeFilter);
    if (row.hidden !== hidden) row.hidden = hidden;
    const box = boxCell.firstChild;
    box.checked = state.selected.has(device.deviceId);
    if (box.checked && consent !== "authorized") unconsented += 1;
  }
  const selected = [...state.selected].filter((id) => fleet.devices.has(id)).length;
  setText(document.getElementById("take-selection"), !selected ? "none selected"
    : `${selected} selected` + (unconsented ? ` · ${unconsented} without consent: a take refuses them (Grant consent on the Fleet page, or the Consent page)` : ""));
  document.getElementById("take-selection").classList.toggle("warn", unconsented > 0);
}

function wireTakeControls() {
  const filter = document.getElementById("take-filter");
  filter.addEventListener("input", () => { state.takeFilter = filter.value; scheduleRender(); });
  document.getElementById("take-select-shown").addEventListener("click", () =>
    select([...fleet.devices.values()].filter((device) => matches(device, state.takeFilter)).map((device) => device.deviceId), true));
  document.getElementById("take-select-none").addEventListener("click", () => select([...state.selected], false));
  document.getElementById("take-start").addEventListener("click", startTake);
  document.getElementById("offload-start").addEventListener("click", offloadTake);
  document.getElementById("moment-take").addEventListener("click", takeMoment);
}

async function loadTakes() {
  takes.loaded = Date.now();
  try {
    const [listed, storage] = await Promise.all([call({ listRecordings: {} }), call({ listStorage: {} })]);
    takes.list = listed.takes || [];
    takes.destinations = (storage.storage || []).map((info) => (info.destination || {}).name).filter(Boolean);
    renderTakes();
    await loadMoments();
  } catch (error) { showProblem(error.message); }
}

// A take's sync verdict (recordings.md, "Sync and integrity"): certified, failed, reported, recording; "" before 1.7.
function syncVerdict(report) {
  const verdict = (report || {}).verdict || "";
  return verdict.startsWith("VERDICT_") ? verdict.slice("VERDICT_".length).toLowerCase() : "";
}

function syncSummary(report) {
  if (!report) return "";
  const verdict = syncVerdict(report);
  const failures = report.failures || [];
  const spread = report.phaseSpread || {};
  const figures = number(spread.samples) ? ` Phase spread p99 ${(number(spread.p99Ns) / 1000).toFixed(1)} µs over ${number(spread.samples)} reports.` : "";
  const cameras = (report.cameras || []).map((camera) => {
    const drops = camera.drops || {};
    const dropped = number(drops.late) + number(drops.outOfBuffers) + number(drops.discontinuity) + number(drops.encoderLate);
    return `${camera.deviceId}: ${number(camera.framesCaptured)}/${number(camera.framesExpected)} frames, ${dropped} dropped, ` +
      `phase p99 ${(number(camera.phaseP99Ns) / 1000).toFixed(1)} µs, out of phase ${(number(camera.outOfPhaseNs) / 1e9).toFixed(1)} s`;
  });
  return `Sync: ${verdict}${verdict === "recording" ? " (figures so far)" : ""}.${figures}` +
    (failures.length ? `\nNot met: ${failures.join("; ")}` : "") + (cameras.length ? `\n${cameras.join("\n")}` : "");
}

function renderTakes() {
  const rows = takes.list.slice().sort((a, b) => Number(b.createdUnixMs) - Number(a.createdUnixMs)).map((take) => el("tr", { "data-take": take.id },
    el("td", {}, take.name || take.id),
    el("td", {}, take.id),
    el("td", { class: `take-${take.state}` }, take.state),
    el("td", { class: `sync-${syncVerdict(take.syncReport)}`, title: ((take.syncReport || {}).failures || []).join("\n") }, syncVerdict(take.syncReport)),
    el("td", {}, String((take.devices || []).length)),
    el("td", {}, String(number(take.frames))),
    el("td", {}, take.store || ""),
    el("td", {}, new Date(Number(take.createdUnixMs)).toLocaleString()),
    el("td", {},
      el("button", { type: "button", onclick: () => showTake(take.id) }, "Show"),
      el("button", { type: "button", onclick: () => verifyTake(take.id) }, "Verify"),
      canOperate() && take.state === "recording" ? el("button", { type: "button", class: "operate", onclick: () => stopTake(take.id) }, "Stop") : null,
      canOperate() && take.store === "agent" && take.state !== "recording" ? el("button", { type: "button", class: "operate", onclick: () => collectTake(take.id) }, "Collect") : null)));
  document.querySelector("#takes tbody").replaceChildren(...rows);
}

async function startTake() {
  const deviceIds = [...state.selected].filter((id) => fleet.devices.has(id));
  if (!deviceIds.length) { showProblem("Select the cameras to record: tick them in the list above (or on the Fleet page)."); return; }
  const atFleet = document.getElementById("take-at").value.trim();
  const request = { deviceIds, name: document.getElementById("take-name").value.trim() };
  if (atFleet) request.atFleetTimeNs = atFleet; else request.fromNowNs = String(Math.round(Number(document.getElementById("take-in").value || 1) * 1e9));
  const codec = document.getElementById("take-codec").value;
  if (codec) request.encoding = { codec };
  try {
    const reply = await call({ startRecording: request });
    const take = (reply.takes || [])[0] || {};
    showProblem("");
    document.getElementById("take-result").textContent = `Take ${take.id} starts at fleet time ${take.startFleetNs} ns`;
    await loadTakes();
    await showTake(take.id);
  } catch (error) { showProblem(error.message); }
}

async function stopTake(takeId) { await act([{ stopRecording: { takeId } }], async () => { await loadTakes(); await showTake(takeId); }); }
async function collectTake(takeId) { await act([{ collectRecording: { takeId } }], async () => { await loadTakes(); await showTake(takeId); }); }

// A take's copies on storage destinations (recordings.md, "Offload"): proved, pending, sending.
function offloadSummary(take) {
  const mb = (bytes) => `${(number(bytes) / 1e6).toFixed(1)} MB`;
  return (take.offloads || []).map((offload) => {
    const state = offload.running ? `offloading, ${mb(offload.sendingBytes)} of the segments under way sent` : (offload.error ? "stopped" : "done");
    return `Offload to ${offload.destination}: ${number(offload.verified)}/${number(offload.segments)} segments proved by SHA-256 ` +
      `(${mb(offload.verifiedBytes)}), ${mb(offload.pendingBytes)} pending, ${state}` +
      (number(offload.heldBack) ? `; ${number(offload.heldBack)} held back (consent not granted)` : "") +
      (offload.destinationFull ? "; the destination is full" : "") + (offload.error ? `\nLast run: ${offload.error}` : "") +
      (offload.indexPath ? `\nIndex: ${offload.indexPath}` : "");
  }).join("\n");
}

async function offloadTake() {
  const takeId = (takes.shown || {}).id;
  const destination = document.getElementById("offload-destination").value;
  if (!takeId || !destination) return;
  await act([{ offloadRecording: { takeId, destination } }], () => showTake(takeId));
}

async function showTake(takeId) {
  try {
    const take = ((await call({ getRecording: { takeId } })).takes || [])[0];
    if (!take) return;
    takes.shown = take;
    const parts = (take.devices || []).map((part) => {
      const segments = (take.segments || []).filter((s) => s.deviceId === part.deviceId);
      const where = segments.map((s) => (s.nodeId ? `${s.nodeId}${s.nodeOnline ? "" : " (offline)"}:${s.path}${s.collectedPath ? ` (copy: ${s.collectedPath})` : ""}` : `coordinator:${s.path}`));
      const drops = part.drops || {};
      return el("tr", {},
        el("td", {}, part.deviceId), el("td", {}, part.nodeId), el("td", {}, part.state),
        el("td", {}, `${part.width || "?"}x${part.height || "?"} ${part.pixelFormat || ""}${part.encoder ? ` (${part.encoder})` : ""}`),
        el("td", {}, String(number(part.frames))),
        el("td", {}, `${number(drops.late)}/${number(drops.outOfBuffers)}/${number(drops.discontinuity)}/${number(drops.encoderLate)}`),
        el("td", { class: "where" }, where.join("\n") || "-"));
    });
    document.getElementById("take-detail-title").textContent =
      `${take.name || take.id}: ${take.state}, from fleet time ${take.startFleetNs}${number(take.stopFleetNs) ? ` to ${take.stopFleetNs}` : ""}, ` +
      `${number(take.frames)} frames, start spread ${(number(take.startSpreadNs) / 1000).toFixed(1)} µs`;
    document.getElementById("take-sync").textContent = syncSummary(take.syncReport);
    document.getElementById("take-offloads").textContent = offloadSummary(take);
    const offload = document.getElementById("take-offload");
    offload.hidden = !canOperate() || take.state === "recording" || !takes.destinations.length;
    const picker = document.getElementById("offload-destination");
    if (picker.dataset.key !== takes.destinations.join(" ")) {
      picker.dataset.key = takes.destinations.join(" ");
      picker.replaceChildren(...takes.destinations.map((name) => el("option", { value: name }, name)));
    }
    // Followed while a copy is under way, as long as this take is the one shown.
    if ((take.offloads || []).some((o) => o.running)) setTimeout(() => { if ((takes.shown || {}).id === takeId) showTake(takeId); }, 2000);
    document.querySelector("#take-parts tbody").replaceChildren(...parts);
    document.getElementById("take-detail").hidden = false;
  } catch (error) { showProblem(error.message); }
}

// MARK: Moments (recordings.md, "Moments" and "Moments by rule"): each with its take and its
// still's pictures, shown together.

const moments = { list: [], rules: [], shown: "" };

async function loadMoments() {
  const [listed, rules] = await Promise.all([call({ listMoments: {} }), call({ listMomentRules: {} })]);
  moments.list = listed.moments || [];
  moments.rules = rules.momentRules || [];
  renderMoments();
}

function renderMoments() {
  const takeState = new Map(takes.list.map((take) => [take.id, take.state]));
  document.querySelector("#moments tbody").replaceChildren(...moments.list.map((moment) => el("tr", { "data-moment": moment.id },
    el("td", {}, moment.name || moment.id),
    el("td", {}, String(moment.instantFleetNs || "")),
    el("td", {}, (moment.deviceIds || []).join(", ")),
    el("td", { title: moment.cause || "" }, moment.cause ? `${moment.trigger}: ${moment.cause}` : `${moment.createdBy || ""} (${moment.trigger || "operator"})`),
    el("td", {}, `${moment.takeId} (${takeState.get(moment.takeId) || "deleted"})`),
    el("td", {}, moment.stillId),
    el("td", {}, new Date(Number(moment.createdUnixMs)).toLocaleString()),
    el("td", {}, el("button", { type: "button", onclick: () => showMoment(moment) }, "Show")))));
  const rules = moments.rules.map((info) => {
    const rule = info.rule || {};
    const counts = `${number(info.fired)} taken` + (number(info.missed) ? `, ${number(info.missed)} missed` : "") +
      (number(info.refused) ? `, ${number(info.refused)} refused` : "");
    return `${rule.name} on ${rule.sourceDeviceId}: ${counts}${info.taking ? " (taking one now)" : ""}${info.lastProblem ? ` (last problem: ${info.lastProblem})` : ""}`;
  });
  setText(document.getElementById("moment-rules"), rules.length ? `Rules: ${rules.join(" · ")}` : "No moment rules (capfleet moment-rule add).");
}

async function takeMoment() {
  const deviceIds = [...state.selected].filter((id) => fleet.devices.has(id));
  if (!deviceIds.length) { showProblem("Select the cameras of the moment: tick them in the list above (or on the Fleet page)."); return; }
  const ms = (id) => Math.round(Number(document.getElementById(id).value || 1.5) * 1000);
  const output = document.getElementById("take-result");
  output.textContent = `Taking a moment of ${deviceIds.length} camera(s)…`;
  try {
    const reply = await call({ takeMoment: { deviceIds, beforeMs: ms("moment-before"), afterMs: ms("moment-after"), name: document.getElementById("take-name").value.trim() } });
    const moment = (reply.moments || [])[0] || {};
    showProblem("");
    output.textContent = `Moment ${moment.id} at fleet time ${moment.instantFleetNs}: take ${moment.takeId}, still ${moment.stillId}`;
    await loadTakes();
    await showMoment(moment);
  } catch (error) { output.textContent = ""; showProblem(error.message); }
}

// The moment's take in the take detail, and its still's pictures beside it, read from the
// coordinator a chunk at a time (ReadStillFile); pictures still being copied from the agents
// are looked for again each second, for a minute.
async function showMoment(moment) {
  moments.shown = moment.id;
  await showTake(moment.takeId);
  document.getElementById("moment-detail-title").textContent = `${moment.name || moment.id}: the still at fleet time ${moment.instantFleetNs}`;
  document.getElementById("moment-detail").hidden = false;
  await showMomentPictures(moment, 60);
}

async function showMomentPictures(moment, attempts) {
  const pictures = document.getElementById("moment-pictures");
  try {
    const still = ((await call({ getStill: { stillId: moment.stillId } })).stills || [])[0];
    if (moments.shown !== moment.id) return;
    if (!still) { pictures.textContent = "Its still was deleted."; return; }
    const shown = [];
    let copying = false;
    for (const device of still.devices || []) {
      for (const image of device.images || []) {
        const caption = `${device.deviceId}: ${image.width}x${image.height}, ${(number(image.spreadNs) / 1e6).toFixed(1)} ms from the instant`;
        const figure = el("figure", {}, el("figcaption", {}, image.stored ? caption : `${caption} (being copied from its agent)`));
        shown.push(figure);
        if (!image.stored) { copying = true; continue; }
        figure.prepend(el("img", { src: await stillPicture(still.id, device.deviceId, image), alt: caption }));
      }
      if (device.error) shown.push(el("p", { class: "warn" }, `${device.deviceId}: ${device.error}`));
      if (device.state === "capturing" || device.state === "collecting") copying = true;
    }
    if (moments.shown !== moment.id) return;
    pictures.replaceChildren(...shown);
    if (copying && attempts > 1) setTimeout(() => showMomentPictures(moment, attempts - 1), 1000);
  } catch (error) { showProblem(error.message); }
}

async function stillPicture(stillId, deviceId, image) {
  const parts = [];
  let offset = 0;
  const size = number(image.sizeBytes);
  do {
    const reply = await call({ readStillFile: { stillId, deviceId, number: image.number, offset: String(offset), length: 1 << 20 } });
    const bytes = Uint8Array.from(atob(reply.segmentData || ""), (c) => c.charCodeAt(0));
    if (!bytes.length) break;
    parts.push(bytes);
    offset += bytes.length;
  } while (offset < size);
  const type = (image.fileName || "").endsWith(".jpg") ? "image/jpeg" : "image/png";
  return URL.createObjectURL(new Blob(parts, { type }));
}

async function verifyTake(takeId) {
  try {
    const take = ((await call({ getRecording: { takeId } })).takes || [])[0];
    const checks = [{ takeId }, ...(take.segments || []).map((s) => ({ takeId, deviceId: s.deviceId, segmentNumber: s.number }))];
    const results = [];
    const output = document.getElementById("take-verification");
    for (const check of checks) {
      const verification = (await call({ verifyRecording: check })).verification || {};
      results.push(`${check.deviceId ? `${check.deviceId} segment ${check.segmentNumber || 0}` : "the take's accounting"}: ` +
        `${verification.ok ? "OK" : "PROBLEM"}${(verification.problems || []).length ? ` (${verification.problems.join("; ")})` : ""}`);
      output.textContent = `Verifying ${take.name || takeId}: ${results.length} of ${checks.length}\n${results.join("\n")}`;
    }
  } catch (error) { showProblem(error.message); }
}

// MARK: Events

function renderEvents() {
  const kind = document.getElementById("event-kind").value;
  const subject = document.getElementById("event-subject").value.trim().toLowerCase();
  const text = document.getElementById("event-text").value.trim().toLowerCase();
  const kinds = new Set(state.events.map((event) => event.kind || ""));
  const select = document.getElementById("event-kind");
  if (select.options.length - 1 !== kinds.size) {
    const current = select.value;
    select.replaceChildren(el("option", { value: "" }, "every kind"),
      ...[...kinds].sort().map((k) => el("option", { value: k }, wireName(k, "EVENT_KIND_"))));
    select.value = current;
  }
  const rows = state.events.filter((event) =>
    (!kind || event.kind === kind) &&
    (!subject || `${event.nodeId || ""} ${event.deviceId || ""}`.toLowerCase().includes(subject)) &&
    (!text || (event.message || "").toLowerCase().includes(text))).slice(-300).reverse().map((event) => el("tr", { class: event.alert ? "alert" : "" },
    el("td", {}, new Date(Number(event.unixMs)).toLocaleTimeString()),
    el("td", {}, wireName(event.kind, "EVENT_KIND_")),
    el("td", {}, [event.nodeId, event.deviceId].filter(Boolean).join(" ")),
    el("td", {}, event.message || "")));
  document.querySelector("#events tbody").replaceChildren(...rows);
}

// MARK: Pages

function showPage() {
  const page = currentPage();
  for (const section of document.querySelectorAll(".page")) section.hidden = section.id !== `page-${page}`;
  for (const link of document.querySelectorAll("header nav a")) link.classList.toggle("active", link.dataset.page === page);
  if (page !== "camera" && liveView.active) stopLiveView();
  if (page === "camera") loadCamera(true);
  if (page === "takes") loadTakes();
  if (page === "consent") consentHistory.loaded = 0;
  render();
}

async function start() {
  const response = await fetch("/api/session");
  const body = await response.json();
  if (!response.ok) { signedOut(body.status.message); return; }
  state.session = body;
  document.body.dataset.role = body.role;
  document.getElementById("who").textContent = `${body.operator} (${body.role})`;
  document.getElementById("signout").addEventListener("click", async () => {
    await fetch("/api/signout", { method: "POST", headers: { "X-CaptureFleet-CSRF": state.session.csrf_token } });
    location.reload();
  });
  wireTakeControls();
  wireFleetControls();
  for (const id of ["event-kind", "event-subject", "event-text"]) document.getElementById(id).addEventListener("input", renderEvents);
  window.addEventListener("hashchange", showPage);
  wireCameraControls();
  showPage();
  connect();
  // Ages ("last frame 1.2 s") move on between updates; a second without one renders anyway.
  setInterval(() => { if (Date.now() - renderedAt > 900) scheduleRender(); }, 1000);
}

start();
