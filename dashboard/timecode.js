// The timecode page (proto-docs/clock.md, "Auditing exposures"): fleet time as a QR code,
// redrawn every display frame, for the fleet's cameras to film so that `capfleet sync-audit`
// can compare what each picture shows with the fleet time stamped on it. The page keeps its
// own estimate of fleet time from the coordinator (the sample with the shortest round trip),
// and each code says the time the frame is due on screen and the display's refresh rate.
"use strict";

// --- QR code, version 3, error correction L, byte mode, mask 0 (ISO/IEC 18004) ---
// Version 3-L: 29 modules a side, one block of 55 data and 15 error-correction codewords,
// room for 53 bytes; a timecode needs 40 at most.
const SIZE = 29;
const DATA_CODEWORDS = 55;
const EC_CODEWORDS = 15;

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
(() => {
  let x = 1;
  for (let i = 0; i < 255; i++) {
    EXP[i] = x;
    LOG[x] = i;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
  for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255];
})();
const multiply = (a, b) => (a === 0 || b === 0 ? 0 : EXP[LOG[a] + LOG[b]]);

// The generator polynomial (x - α^0)...(x - α^14), highest power first without its leading 1.
const GENERATOR = (() => {
  let g = [1];
  for (let i = 0; i < EC_CODEWORDS; i++) {
    const next = new Array(g.length + 1).fill(0);
    for (let j = 0; j < g.length; j++) {
      next[j] ^= g[j];
      next[j + 1] ^= multiply(g[j], EXP[i]);
    }
    g = next;
  }
  return g.slice(1);
})();

function errorCorrection(data) {
  const remainder = new Array(EC_CODEWORDS).fill(0);
  for (const byte of data) {
    const factor = byte ^ remainder.shift();
    remainder.push(0);
    for (let i = 0; i < EC_CODEWORDS; i++) remainder[i] ^= multiply(GENERATOR[i], factor);
  }
  return remainder;
}

function codewords(text) {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > 53) throw new Error("too long for a version 3 code");
  const bits = [];
  const put = (value, length) => { for (let i = length - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
  put(0b0100, 4);
  put(bytes.length, 8);
  for (const byte of bytes) put(byte, 8);
  put(0, Math.min(4, DATA_CODEWORDS * 8 - bits.length));
  while (bits.length % 8) bits.push(0);
  const data = [];
  for (let i = 0; i < bits.length; i += 8) data.push(bits.slice(i, i + 8).reduce((a, b) => (a << 1) | b, 0));
  for (let pad = 0xec; data.length < DATA_CODEWORDS; pad ^= 0xec ^ 0x11) data.push(pad);
  return data.concat(errorCorrection(data));
}

// The modules that are not data: finders, separators, timing, the alignment pattern, the
// format information and the dark module, drawn once (mask 0 and level L never change).
const TEMPLATE = (() => {
  const dark = Array.from({ length: SIZE }, () => new Array(SIZE).fill(false));
  const fixed = Array.from({ length: SIZE }, () => new Array(SIZE).fill(false));
  const set = (x, y, value) => { dark[y][x] = value; fixed[y][x] = true; };
  for (let i = 0; i < SIZE; i++) { set(6, i, i % 2 === 0); set(i, 6, i % 2 === 0); }
  for (const [cx, cy] of [[3, 3], [SIZE - 4, 3], [3, SIZE - 4]]) {
    for (let dy = -4; dy <= 4; dy++) {
      for (let dx = -4; dx <= 4; dx++) {
        const x = cx + dx, y = cy + dy;
        if (x < 0 || y < 0 || x >= SIZE || y >= SIZE) continue;
        const ring = Math.max(Math.abs(dx), Math.abs(dy));
        set(x, y, ring !== 2 && ring !== 4);
      }
    }
  }
  for (let dy = -2; dy <= 2; dy++) for (let dx = -2; dx <= 2; dx++) set(22 + dx, 22 + dy, Math.max(Math.abs(dx), Math.abs(dy)) !== 1);
  // Format: level L (01), mask 0 (000), BCH(15,5), XOR 0x5412.
  const format = 0b01000;
  let remainder = format;
  for (let i = 0; i < 10; i++) remainder = (remainder << 1) ^ ((remainder >>> 9) * 0x537);
  const bits = ((format << 10) | remainder) ^ 0x5412;
  const bit = (i) => ((bits >>> i) & 1) !== 0;
  for (let i = 0; i <= 5; i++) set(8, i, bit(i));
  set(8, 7, bit(6));
  set(8, 8, bit(7));
  set(7, 8, bit(8));
  for (let i = 9; i < 15; i++) set(14 - i, 8, bit(i));
  for (let i = 0; i < 8; i++) set(SIZE - 1 - i, 8, bit(i));
  for (let i = 8; i < 15; i++) set(8, SIZE - 15 + i, bit(i));
  set(8, SIZE - 8, true);
  return { dark, fixed };
})();

/// The code's modules, true for dark.
function qrModules(text) {
  const words = codewords(text);
  const dark = TEMPLATE.dark.map((row) => row.slice());
  let index = 0;
  for (let right = SIZE - 1; right >= 1; right -= 2) {
    if (right === 6) right = 5;
    const upward = ((right + 1) & 2) === 0;
    for (let vertical = 0; vertical < SIZE; vertical++) {
      for (let j = 0; j < 2; j++) {
        const x = right - j, y = upward ? SIZE - 1 - vertical : vertical;
        if (TEMPLATE.fixed[y][x]) continue;
        const value = index < words.length * 8 ? ((words[index >>> 3] >>> (7 - (index & 7))) & 1) === 1 : false;
        index++;
        dark[y][x] = value !== ((x + y) % 2 === 0);
      }
    }
  }
  return dark;
}

// --- Fleet time ---
// Fleet time minus this page's performance.now() (ns, BigInt), from the exchange with the
// shortest round trip: the error of the estimate is at most half that round trip.
const clock = { offset: null, roundTripMs: Infinity, at: 0 };

async function sample() {
  const sent = performance.now();
  const response = await fetch("/api/fleet-time", { cache: "no-store" });
  const received = performance.now();
  if (!response.ok) throw new Error(`the coordinator answered ${response.status}`);
  const { fleet_ns: fleet } = await response.json();
  const roundTrip = received - sent;
  // A sample a minute old is replaced by a fresh one even if slower: the browser's clock drifts.
  if (roundTrip <= clock.roundTripMs || performance.now() - clock.at > 60000) {
    clock.offset = BigInt(fleet) - BigInt(Math.round(((sent + received) / 2) * 1e6));
    clock.roundTripMs = roundTrip;
    clock.at = received;
  }
}

async function synchronise() {
  for (;;) {
    try {
      for (let i = 0; i < 8; i++) await sample();
      document.getElementById("status").textContent = "";
    } catch (error) {
      document.getElementById("status").textContent = `cannot read fleet time: ${error.message}`;
    }
    await new Promise((resolve) => setTimeout(resolve, 10000));
  }
}

// --- Drawing ---
const intervals = [];
let previous = null;

function refreshMilliseconds() {
  if (intervals.length < 10) return 0;
  const sorted = intervals.slice().sort((a, b) => a - b);
  return sorted[sorted.length >> 1];
}

function draw(now) {
  requestAnimationFrame(draw);
  if (previous !== null) {
    intervals.push(now - previous);
    if (intervals.length > 120) intervals.shift();
  }
  previous = now;
  if (clock.offset === null) return;
  const period = refreshMilliseconds();
  // The frame drawn now is shown at the next refresh.
  const shown = clock.offset + BigInt(Math.round((now + period) * 1e6));
  const refresh = period > 0 ? Math.round(1e6 / period) : 0;
  const text = `CFTC1 F ${shown} ${refresh}`;
  const modules = qrModules(text);
  const canvas = document.getElementById("code");
  const side = Math.floor(Math.min(window.innerWidth, window.innerHeight * 0.85) / (SIZE + 8)) * (SIZE + 8);
  if (canvas.width !== side) { canvas.width = side; canvas.height = side; }
  const context = canvas.getContext("2d");
  const unit = side / (SIZE + 8);
  context.fillStyle = "#fff";
  context.fillRect(0, 0, side, side);
  context.fillStyle = "#000";
  for (let y = 0; y < SIZE; y++) for (let x = 0; x < SIZE; x++) if (modules[y][x]) context.fillRect((x + 4) * unit, (y + 4) * unit, unit, unit);
  document.getElementById("time").textContent =
    `fleet ${shown} ns · ±${(clock.roundTripMs / 2).toFixed(2)} ms from the coordinator · ` +
    (period > 0 ? `display ${(1000 / period).toFixed(2)} Hz: a picture is no finer than ${period.toFixed(1)} ms` : "measuring the display");
}

synchronise();
requestAnimationFrame(draw);
