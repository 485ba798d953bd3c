// SPDX-License-Identifier: MIT
// report.js - draws gpumem's HTML report from the data in <script id="gm-data"> (schema
// gpumem.report/2, described in src/report/html.c).  Plain JavaScript and <canvas>; no
// framework, no request to anything outside this file.
//
// The page never computes a figure the C side did not give it: it draws the level-of-detail
// buckets (each with the exact least and most that held in it) as unions of whole buckets,
// steps through the series' real states, and rebuilds the allocator's state at an event from
// the windows of page data (html_state.c) by the library's rules.  window.gmReport exposes
// what each chart drew, for the browser tests.
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('gm-data').textContent);
  // Hugging Face post colours: parameters blue, activations orange, gradients yellow,
  // optimizer state green, optimizer temporaries red, others grey (inputs purple).
  const CAT_COLORS = ['#1f77b4', '#9467bd', '#ff7f0e', '#e8c021', '#2ca02c', '#d62728', '#a0a0a0', '#7f7f7f'];
  const CAT_LABELS = ['parameters', 'inputs', 'activations', 'gradients', 'optimizer state',
    'optimizer temporaries', 'other', 'unknown (no analysis)'];
  const PHASE_FILL = [null, 'rgba(255,127,14,0.09)', 'rgba(31,119,180,0.09)', 'rgba(44,160,44,0.12)'];
  const PHASE_LABELS = ['other', 'forward', 'backward', 'optimizer step'];
  const ANNOT_FILL = ['#263238', '#ad1457', '#00838f']; // apart from every category colour
  const UPHASE_FILL = ['rgba(148,103,189,0.10)', 'rgba(23,190,207,0.10)', 'rgba(188,189,34,0.12)', 'rgba(227,119,194,0.10)'];
  const GIB = 1073741824, MIB = 1048576, KIB = 1024;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) {
      if (k === 'class') e.className = attrs[k];
      else if (k === 'style') e.style.cssText = attrs[k];
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids) if (c !== null && c !== undefined)
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    return e;
  };

  // ---- formatting ----
  function fmtBytes(b) {
    if (b >= GIB) return (b / GIB).toFixed(2) + ' GiB';
    if (b >= MIB) return (b / MIB).toFixed(2) + ' MiB';
    if (b >= KIB) return (b / KIB).toFixed(2) + ' KiB';
    return b + ' B';
  }
  const group3 = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const fmtExact = (b) => group3(b) + ' bytes';
  const fmtBoth = (b) => fmtBytes(b) + ' (' + fmtExact(b) + ')';
  const fmtHover = (b) => fmtBytes(b) + ' = ' + fmtExact(b) + ' = ' + (b / GIB).toFixed(b >= GIB ? 2 : 4) + ' GiB';
  const pct = (a, b) => (b > 0 ? (100 * a / b).toFixed(1) : '0.0') + '%';
  const hex = (a) => '0x' + Number(a).toString(16);
  let dev = null, R = null; // the device shown and its rank
  // A time or event on the x axis, in one unit for the device (s, ms or µs by its span); with
  // 'step' (an axis' ticks) as many decimals as tell neighbours apart (zoomed into
  // milliseconds of a trace of seconds: "1.405 s", "1.410 s")
  function fmtX(x, step) {
    if (!dev || dev.x_unit !== 'us') return 'event ' + Math.round(x);
    const a = Math.abs(dev.x1), unit = a >= 1e6 ? 1e6 : a >= 1e4 ? 1e3 : 1;
    const base = unit === 1e6 ? (a >= 100e6 ? 1 : 2) : unit === 1e3 ? 1 : 0;
    const d = step ? Math.min(6, Math.max(base, Math.ceil(-Math.log10(step / unit) - 1e-9))) : base;
    return (x / unit).toFixed(d) + (unit === 1e6 ? ' s' : unit === 1e3 ? ' ms' : ' µs');
  }
  function catColor(c) { return CAT_COLORS[c] || CAT_COLORS[6]; }
  function shade(hexc, i) {
    const n = parseInt(hexc.slice(1), 16);
    let r = n >> 16, g = (n >> 8) & 255, b = n & 255;
    const f = [0, 0.16, -0.12, 0.28, -0.22][i % 5];
    const t = f > 0 ? 255 : 0, a = Math.abs(f);
    r = Math.round(r + (t - r) * a); g = Math.round(g + (t - g) * a); b = Math.round(b + (t - b) * a);
    return 'rgb(' + r + ',' + g + ',' + b + ')';
  }
  const phaseLabel = (p) => PHASE_LABELS[D.phases.indexOf(p)] || p;

  // ---- devices of every rank ----
  const DEVS = [];
  D.ranks.forEach((r, ri) => r.devices.forEach((d) => { d.rank = ri; DEVS.push(d); }));
  const multi = D.ranks.length > 1;
  // a rank's number (its file name's, its device's or its place: D.job.rank_from)
  const rankId = (ri) => (D.job && D.job.rank_ids && D.job.rank_ids[ri] != null ? D.job.rank_ids[ri] : ri);
  const devName = (d) => (multi ? 'rank ' + rankId(d.rank) + ' · ' : '') + 'cuda:' + d.device;

  // ---- stacks ----
  function frameText(f) { return f[0] + ':' + f[2] + ' ' + f[1]; }
  function stackFrames(id) { return (R.stacks && R.stacks[String(id)]) || []; }
  function whereOf(id) {
    const fr = stackFrames(id);
    for (const i of fr) if (R.frames[i][3]) return R.frames[i];
    return fr.length ? R.frames[fr[0]] : null;
  }
  const short = (f) => f[0].split(/[\\/]/).pop() + ':' + f[2] + ' ' + f[1];
  // The first user frame, and the innermost frame when that is another one (two sites
  // called from the same user line stay apart: "train.py:60 train_step via adamw.py:120 _init_group").
  function whereText(id) {
    const f = whereOf(id), fr = stackFrames(id);
    if (!f) return '(no stack recorded)';
    const inner = R.frames[fr[0]];
    return short(f) + (inner && inner !== f ? ' via ' + short(inner) : '');
  }
  // The stack with the user's frames first, then the library frames (innermost first).
  function stackList(id, max) {
    const fr = stackFrames(id);
    const ul = el('ul', { class: 'frames' });
    if (!fr.length) { ul.appendChild(el('li', { class: 'sep' }, '(no stack recorded)')); return ul; }
    const user = fr.filter((i) => R.frames[i][3]), lib = fr.filter((i) => !R.frames[i][3]);
    let n = 0;
    for (const i of user) if (n++ < max) ul.appendChild(el('li', { class: 'user' }, frameText(R.frames[i])));
    if (lib.length) ul.appendChild(el('li', { class: 'sep' }, user.length ? '... called through ' + lib.length + ' library frame(s):' : 'library frames:'));
    for (const i of lib) if (n++ < max) ul.appendChild(el('li', { class: 'lib' }, frameText(R.frames[i])));
    if (n > max) ul.appendChild(el('li', { class: 'sep' }, (n - max) + ' more frame(s)'));
    return ul;
  }

  // ---- tooltip ----
  const tip = $('tip');
  function showTip(ev, title, lines, stack) {
    tip.textContent = '';
    tip.appendChild(el('div', { class: 't' }, title));
    for (const l of lines) tip.appendChild(el('div', null, l));
    if (stack !== undefined && stack !== null) tip.appendChild(stackList(stack, 18));
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - 14);
    if (y + h > window.innerHeight - 4) y = Math.max(4, window.innerHeight - h - 4);
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }

  // ---- canvas helpers ----
  const M = { l: 74, r: 14, t: 12, b: 26 };
  function setup(canvas, h) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.parentElement.clientWidth || 900;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    canvas.style.height = h + 'px';
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    return { g, w, h, pw: Math.max(10, Math.floor(w - M.l - M.r)), ph: h - M.t - M.b };
  }
  function niceStep(range, n) {
    const raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  // y ticks in one unit, all with two decimals ("0.50 GiB", "1.00 GiB", "1.50 GiB")
  function byteTicks(max) {
    const unit = max >= GIB ? GIB : max >= MIB ? MIB : KIB, name = unit === GIB ? 'GiB' : unit === MIB ? 'MiB' : 'KiB';
    const step = niceStep(max / unit, 5), out = [];
    for (let i = 0; i * step * unit <= max + 1e-9 && i < 50; i++) out.push([i * step * unit, (i * step).toFixed(2) + ' ' + name]);
    return out;
  }
  function axes(c, view, ymax) {
    const g = c.g;
    g.strokeStyle = '#e3e7eb'; g.fillStyle = '#5f6b76'; g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1; g.textAlign = 'right'; g.textBaseline = 'middle';
    const ticks = byteTicks(ymax);
    for (const [v, label] of ticks) {
      const y = M.t + c.ph - v / ymax * c.ph;
      g.beginPath(); g.moveTo(M.l, y + 0.5); g.lineTo(M.l + c.pw, y + 0.5); g.stroke();
      g.fillText(label, M.l - 6, y);
    }
    c.ylabels = ticks.map((t) => t[1]);
    g.textAlign = 'center'; g.textBaseline = 'top';
    const span = view[1] - view[0], step0 = niceStep(span, Math.max(2, Math.floor(c.pw / 110)));
    const step = dev && dev.x_unit !== 'us' ? Math.max(1, step0) : step0; // whole events
    c.xlabels = [];
    for (let x = Math.ceil(view[0] / step) * step, i = 0; x <= view[1] && i < 100; x += step, i++) {
      const px = M.l + (x - view[0]) / span * c.pw, label = fmtX(x, step);
      g.beginPath(); g.moveTo(px + 0.5, M.t + c.ph); g.lineTo(px + 0.5, M.t + c.ph + 4); g.stroke();
      g.textAlign = px > M.l + c.pw - 40 ? 'right' : px < M.l + 30 ? 'left' : 'center';
      g.fillText(label, Math.min(px, M.l + c.pw), M.t + c.ph + 7);
      c.xlabels.push(label);
    }
    g.strokeStyle = '#9aa5b1';
    g.beginPath(); g.moveTo(M.l + 0.5, M.t); g.lineTo(M.l + 0.5, M.t + c.ph); g.lineTo(M.l + c.pw, M.t + c.ph + 0.5); g.stroke();
  }

  // ---- state ----
  let view = [0, 1];
  const drawn = {};
  function setView(a, b) {
    let lo = Math.max(dev.x0, Math.min(a, b)), hi = Math.min(dev.x1, Math.max(a, b));
    if (hi - lo < 1) { // one microsecond or one event is the finest view
      const mid = (lo + hi) / 2;
      lo = Math.max(dev.x0, mid - 0.5); hi = Math.min(dev.x1, lo + 1);
    }
    view = hi > lo ? [lo, hi] : [dev.x0, dev.x1];
    drawTimeline(); drawCats(); drawSegtl();
  }

  // Per pixel column: the union of the level-of-detail buckets it overlaps, so that its
  // least and most are exactly the least and most that held anywhere in it.
  function columns(pw) {
    const L = dev.lod, n = L.n, full = dev.x1 - dev.x0 || 1, span = view[1] - view[0], dx = span / pw;
    const cols = { amin: new Float64Array(pw), amax: new Float64Array(pw), rmax: new Float64Array(pw), k: new Float64Array(pw), kr: new Float64Array(pw), b: new Int32Array(pw) };
    for (let c = 0; c < pw; c++) {
      const xa = view[0] + c * dx, xb = xa + dx;
      let b0 = Math.floor((xa - dev.x0) / full * n), b1 = Math.ceil((xb - dev.x0) / full * n) - 1;
      b0 = Math.max(0, Math.min(n - 1, b0)); b1 = Math.max(b0, Math.min(n - 1, b1));
      let am = -1, an = Infinity, rm = -1, k = -1, kr = -1, bm = b0;
      for (let b = b0; b <= b1; b++) {
        if (L.amax[b] > am) { am = L.amax[b]; k = L.kmax[b]; bm = b; }
        if (L.amin[b] < an) an = L.amin[b];
        if (L.rmax[b] > rm) { rm = L.rmax[b]; kr = L.krmax[b]; }
      }
      cols.amin[c] = an; cols.amax[c] = am; cols.rmax[c] = rm; cols.k[c] = k; cols.kr[c] = kr; cols.b[c] = bm;
    }
    return cols;
  }

  // user phases and OOM markers over a time chart
  function drawUserPhases(c, g, X, labels) {
    let i = 0;
    for (const u of dev.uphases || []) {
      if (u[1] < view[0] || u[0] > view[1]) { i++; continue; }
      const a = Math.max(M.l, X(u[0])), b = Math.min(M.l + c.pw, X(u[1]));
      g.fillStyle = UPHASE_FILL[i % UPHASE_FILL.length];
      g.fillRect(a, M.t, Math.max(1, b - a), c.ph);
      if (labels && b - a > 30) {
        g.fillStyle = '#5f3d8a'; g.font = '11px system-ui, sans-serif'; g.textAlign = 'left'; g.textBaseline = 'top';
        g.fillText(u[2], a + 3, M.t + 2 + 12 * (i % 2));
      }
      i++;
    }
  }
  // every record_function range, as thin bars along the bottom of the timeline (a range
  // inside another one lane up); returns how many are drawn
  function drawAnnotations(c, g, X) {
    const ends = [];
    let n = 0;
    for (const a of dev.annotations || []) {
      let lane = 0;
      while (lane < ends.length && ends[lane] > a[0]) lane++;
      ends[lane] = a[1];
      if (a[1] < view[0] || a[0] > view[1] || lane > 5) continue;
      const x0 = Math.max(M.l, X(a[0])), x1 = Math.min(M.l + c.pw, X(a[1]));
      const y = M.t + c.ph - 5 * (lane + 1);
      g.fillStyle = '#fff'; // a light edge keeps the bar apart from the areas under it
      g.fillRect(x0 - 1, y - 1, Math.max(1, x1 - x0) + 2, 5);
      g.fillStyle = ANNOT_FILL[lane % ANNOT_FILL.length];
      g.fillRect(x0, y, Math.max(1, x1 - x0), 3);
      n++;
    }
    return n;
  }
  // The markers' lines go behind the data (a one-pixel spike at the peak must stay visible),
  // their labels on top: drawOoms(c, g, X, false) before the data, (.., true) after.
  function drawOoms(c, g, X, labels) {
    let n = 0;
    for (const o of dev.ooms || []) {
      if (o.x < view[0] || o.x > view[1]) continue;
      n++;
      const px = Math.round(X(o.x)) + 0.5;
      if (!labels) {
        g.strokeStyle = '#b00020'; g.lineWidth = 1.5; g.setLineDash([2, 2]);
        g.beginPath(); g.moveTo(px, M.t); g.lineTo(px, M.t + c.ph); g.stroke(); g.setLineDash([]);
        continue;
      }
      // in the band above the data (the charts keep 12% of headroom), the second line
      g.fillStyle = '#b00020'; g.font = '600 11px system-ui, sans-serif'; g.textBaseline = 'top';
      g.textAlign = px > M.l + c.pw - 100 ? 'right' : 'left';
      g.fillText('OOM ' + fmtBytes(o.requested), px + (g.textAlign === 'right' ? -3 : 3), M.t + 14);
    }
    return n;
  }

  // ---- view 1: active memory timeline ----
  function bandsInView() {
    const full = dev.x1 - dev.x0, span = view[1] - view[0];
    if (!dev.rbands || !dev.rbands.length || span > full / 3) return dev.bands;
    const out = dev.bands.slice(), seen = new Set();
    for (const b of out) seen.add(b[0] + ':' + b[7]);
    for (const r of dev.rbands) {
      if (r.x1 < view[0] || r.x0 > view[1]) continue;
      for (const b of r.b) {
        const key = b[0] + ':' + b[7];
        if (!seen.has(key)) { seen.add(key); out.push(b); }
      }
    }
    out.sort((p, q) => p[0] - q[0] || p[7] - q[7]);
    return out;
  }
  // The merged stack of a category: its colour, lighter, hatched (a band is flat), so that
  // merged "other" (grey) is never taken for the grey of a page without an analysis.
  function mergedFill(g, cat) {
    const p = document.createElement('canvas'), q = p.getContext('2d'), c = catColor(cat);
    p.width = p.height = 8;
    q.fillStyle = c + '99'; q.fillRect(0, 0, 8, 8); // 60% opaque
    q.strokeStyle = c + 'dd'; q.lineWidth = 2; q.beginPath();
    q.moveTo(0, 8); q.lineTo(8, 0); q.moveTo(-2, 2); q.lineTo(2, -2); q.moveTo(6, 10); q.lineTo(10, 6);
    q.stroke();
    return g.createPattern(p, 'repeat');
  }
  // lod.rest's runs [value, buckets, ...] as one value a bucket (once a device)
  function restOf(d) {
    if (d.restBuckets !== undefined) return d.restBuckets;
    const R = d.lod && d.lod.rest;
    d.restBuckets = R ? R.map((r) => {
      if (!r) return null;
      const v = new Float64Array(d.lod.n);
      for (let i = 0, b = 0; i + 1 < r.length; i += 2) {
        const e = Math.min(d.lod.n, b + r[i + 1]);
        v.fill(r[i], b, e);
        b = e;
      }
      return v;
    }) : null;
    return d.restBuckets;
  }
  function bandsNote(nb) {
    return group3(nb) + ' of ' + group3(dev.n_allocs) + ' allocations drawn one by one' +
      (dev.n_edge ? ', ' + group3(dev.n_edge) + ' of them alive at the start or the end of the trace' : '') + (nb > dev.bands.length ? ' (more in this zoomed view)' : '');
  }
  let tl = null;
  function drawTimeline() {
    if (!dev.lod) return;
    const canvas = $('timeline').querySelector('canvas');
    const c = setup(canvas, 330), g = c.g, pw = c.pw;
    const cols = columns(pw);
    let ymax = 1, drawnMax = 0;
    for (let i = 0; i < pw; i++) { ymax = Math.max(ymax, cols.amax[i], cols.rmax[i]); drawnMax = Math.max(drawnMax, cols.amax[i]); }
    ymax *= 1.12; // headroom: the labels of the peak and the OOMs go above the data
    const span = view[1] - view[0], X = (x) => M.l + (x - view[0]) / span * pw;
    drawUserPhases(c, g, X, true);
    axes(c, view, ymax);
    const Y = (v) => M.t + c.ph - v / ymax * c.ph;
    const p = dev.peak, peakIn = p.x >= view[0] && p.x <= view[1];
    drawOoms(c, g, X, false);
    if (peakIn) {
      const px = Math.round(X(p.x)) + 0.5;
      g.strokeStyle = '#d62728'; g.lineWidth = 1; g.setLineDash([4, 3]);
      g.beginPath(); g.moveTo(px, M.t); g.lineTo(px, M.t + c.ph); g.stroke(); g.setLineDash([]);
    }
    const bands = bandsInView(), nb = bands.length, main = new Set(dev.bands), rest = restOf(dev);
    const off = new Float64Array(nb * pw).fill(-1), top = new Float64Array(pw);
    // the rest, merged, as a stack of categories above the bands (lod.rest: of each bucket,
    // what is not a band of the whole trace at its most allocated event, by category; a
    // zoomed view's own bands are taken out of their category)
    const mOff = new Float64Array(7 * pw), mLen = new Float64Array(7 * pw), grey = new Float64Array(pw);
    const byCat = []; for (let cat = 0; cat < 7; cat++) byCat.push(new Float64Array(pw));
    for (let x = 0; x < pw; x++) {
      const k = cols.k[x], extra = [0, 0, 0, 0, 0, 0, 0];
      let acc = 0;
      for (let i = 0; i < nb; i++) {
        const b = bands[i];
        if (b[0] <= k && k < b[1]) {
          off[i * pw + x] = acc; acc += b[4];
          byCat[b[5] < 7 ? b[5] : 6][x] += b[4];
          if (!main.has(b)) extra[b[5] < 7 ? b[5] : 6] += b[4];
        }
      }
      top[x] = Math.min(acc, cols.amax[x]);
      let m = top[x];
      for (let cat = 0; cat < 7; cat++) {
        const r = rest && rest[cat] ? Math.max(0, Math.min(rest[cat][cols.b[x]] - extra[cat], cols.amax[x] - m)) : 0;
        mOff[cat * pw + x] = m; mLen[cat * pw + x] = r; m += r; byCat[cat][x] += r;
      }
      grey[x] = Math.max(0, cols.amax[x] - m); // only without an analysis (no categories)
    }
    let polys = 0;
    for (let i = 0; i < nb; i++) {
      g.fillStyle = shade(catColor(bands[i][5]), i);
      let x = 0;
      while (x < pw) {
        while (x < pw && off[i * pw + x] < 0) x++;
        if (x >= pw) break;
        const s = x;
        while (x < pw && off[i * pw + x] >= 0) x++;
        g.beginPath();
        for (let j = s; j < x; j++) {
          const y = Y(off[i * pw + j] + bands[i][4]);
          if (j === s) g.moveTo(M.l + j, y); else g.lineTo(M.l + j, y);
          g.lineTo(M.l + j + 1, y);
        }
        for (let j = x - 1; j >= s; j--) { const y = Y(off[i * pw + j]); g.lineTo(M.l + j + 1, y); g.lineTo(M.l + j, y); }
        g.closePath(); g.fill(); polys++;
      }
    }
    // the merged stack, each category lighter than its bands, then (without an analysis)
    // grey up to the most allocated in each column
    const area = (lo, hi) => {
      g.beginPath();
      for (let x = 0; x < pw; x++) { const y = Y(hi(x)); x ? g.lineTo(M.l + x, y) : g.moveTo(M.l, y); g.lineTo(M.l + x + 1, y); }
      for (let x = pw - 1; x >= 0; x--) { const y = Y(lo(x)); g.lineTo(M.l + x + 1, y); g.lineTo(M.l + x, y); }
      g.closePath(); g.fill();
    };
    const merged = [0, 0, 0, 0, 0, 0, 0], mergedAt = [];
    for (let cat = 0; cat < 7; cat++) {
      let any = 0, at = 0;
      for (let x = 0; x < pw; x++) if (mLen[cat * pw + x] > any) { any = mLen[cat * pw + x]; at = x; }
      if (!any) continue;
      merged[cat] = any;
      mergedAt.push([cat, at, mOff[cat * pw + at], mOff[cat * pw + at] + any]); // where it is tallest
      g.fillStyle = mergedFill(g, cat);
      area((x) => mOff[cat * pw + x], (x) => mOff[cat * pw + x] + mLen[cat * pw + x]);
    }
    g.fillStyle = 'rgba(200,200,200,0.75)';
    area((x) => cols.amax[x] - grey[x], (x) => Math.max(top[x], cols.amax[x]));
    // the most allocated as a dark edge: a one-pixel column that stands above its neighbours
    // (the peak is often one) is drawn dark over its whole rise, so that the eye sees it reach
    // the peak's height and not only the light merged area around it
    g.fillStyle = 'rgba(70,78,86,0.9)';
    for (let x = 0; x < pw; x++) {
      const y = Y(cols.amax[x]);
      const nb = Math.max(x ? cols.amax[x - 1] : 0, x + 1 < pw ? cols.amax[x + 1] : 0);
      g.fillRect(M.l + x, y, 1, Math.max(2, Y(Math.min(nb, cols.amax[x])) - y)); // 2: a whole pixel row
    }
    // where a column's least differs from its most, the least as a thin line
    g.strokeStyle = 'rgba(40,60,80,0.3)'; g.lineWidth = 1;
    g.beginPath();
    for (let x = 0; x < pw; x++) {
      if (cols.amin[x] >= cols.amax[x]) continue;
      const y = Math.round(Y(cols.amin[x])) + 0.5;
      g.moveTo(M.l + x, y); g.lineTo(M.l + x + 1, y);
    }
    g.stroke();
    // reserved
    g.strokeStyle = '#1d2228'; g.lineWidth = 1.2; g.setLineDash([]);
    g.beginPath();
    for (let x = 0; x < pw; x++) { const y = Y(cols.rmax[x]); x ? g.lineTo(M.l + x, y) : g.moveTo(M.l, y); g.lineTo(M.l + x + 1, y); }
    g.stroke();
    const nAnnotations = drawAnnotations(c, g, X); // over the data, along its bottom
    const nOoms = drawOoms(c, g, X, true);
    if (peakIn) {
      // the dot beside the peak's column, so that it never covers the top of the spike
      const px = X(p.x), py = Y(p.bytes);
      const dx = px + 9 > M.l + pw ? -5 : 5; // inside the plot when the peak is at its right end
      g.fillStyle = '#d62728'; g.beginPath(); g.arc(px + dx, py, 3, 0, 7); g.fill();
      g.font = '600 12px system-ui, sans-serif'; g.textBaseline = 'top';
      g.textAlign = px > M.l + pw - 160 ? 'right' : 'left';
      g.fillText('peak ' + fmtBytes(p.bytes), px + (g.textAlign === 'right' ? -6 : 6), M.t + 1);
    }
    tl = { c, pw, cols, off, top, Y, ymax, bands, mOff, mLen };
    let bandCols = 0;
    for (let x = 0; x < pw; x++) for (let i = 0; i < nb; i++) if (off[i * pw + x] >= 0) { bandCols++; break; }
    const stackTop = Array.from(cols.amax, (a, x) => { let t = grey[x]; for (let cat = 0; cat < 7; cat++) t += byCat[cat][x]; return t; });
    drawn.timeline = { view: view.slice(), pw, max: drawnMax, byCat: byCat.map((v) => Array.from(v)), grey: Array.from(grey), stackTop, merged, mergedAt, bandCols, amax: Array.from(cols.amax), amin: Array.from(cols.amin), rmax: Array.from(cols.rmax), ylabels: c.ylabels, xlabels: c.xlabels, ooms: nOoms, uphases: (dev.uphases || []).length, ymax, top: M.t, ph: c.ph, left: M.l };
    drawn.timeline.annotations = nAnnotations;
    canvas.dataset.drawn = String(polys + 1);
    canvas.dataset.view = view[0] + ',' + view[1];
    canvas.dataset.bands = String(nb);
    canvas.dataset.max = String(drawnMax);
    const note = $('bands-note');
    if (note) note.textContent = bandsNote(nb);
  }

  function hoverTimeline(ev) {
    if (!tl) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = Math.floor(ev.clientX - r.left - M.l), y = ev.clientY - r.top;
    if (x < 0 || x >= tl.pw || y < M.t || y > M.t + tl.c.ph) { hideTip(); return; }
    const v = (M.t + tl.c.ph - y) / tl.c.ph * tl.ymax, bands = tl.bands;
    const xa = view[0] + x / tl.pw * (view[1] - view[0]), xb = view[0] + (x + 1) / tl.pw * (view[1] - view[0]);
    for (let i = 0; i < bands.length; i++) {
      const o = tl.off[i * tl.pw + x];
      if (o >= 0 && v >= o && v < o + bands[i][4]) {
        const b = bands[i];
        showTip(ev, fmtHover(b[4]), [
          'category: ' + CAT_LABELS[b[5]],
          'address: ' + hex(b[7]) + ', stream: ' + b[8],
          'alive: ' + fmtX(b[2]) + (b[0] < 0 ? ' (before the trace)' : '') + ' to ' + (b[1] >= dev.n_events ? 'the end' : fmtX(b[3])),
        ], b[6]);
        return;
      }
    }
    for (let cat = 0; cat < 7; cat++) {
      const o = tl.mOff[cat * tl.pw + x], n = tl.mLen[cat * tl.pw + x];
      if (n > 0 && v >= o && v < o + n) {
        showTip(ev, fmtHover(n), ['category: ' + CAT_LABELS[cat], 'smaller allocations, merged (after event ' + tl.cols.k[x] + ')']);
        return;
      }
    }
    const a = tl.cols.amax[x], lo = tl.cols.amin[x], rs = tl.cols.rmax[x];
    const lines = [a > lo ? 'allocated: from ' + fmtBytes(lo) + ' to ' + fmtBoth(a) + ' (most after event ' + tl.cols.k[x] + ')' : 'allocated: ' + fmtBoth(a), 'reserved: up to ' + fmtBoth(rs)];
    for (const u of dev.uphases || []) if (u[0] <= xb && xa <= u[1]) lines.push('your phase: ' + u[2]);
    for (const a of dev.annotations || []) if (a[0] <= xb && xa <= a[1]) lines.push('annotation ' + a[2] + ': ' + fmtBytes(a[3]) + ' at its start, ' + fmtBytes(a[4]) + ' most, ' + fmtBytes(a[5]) + ' at its end');
    const its = dev.iterations || [], it = its.find((t) => t.x0 <= xa && xa < t.x1);
    if (it) lines.push('iteration ' + it.n + ' of ' + group3(its.length));
    for (const o of dev.ooms || []) if (o.x >= xa && o.x < xb) lines.push('out of memory: ' + fmtBytes(o.requested) + ' requested (' + o.verdict + ')');
    showTip(ev, fmtX(xa) + (xb - xa >= 1 ? ' to ' + fmtX(xb) : ''), lines);
  }

  // ---- view 2: categories over time ----
  let cs = null;
  function drawCats() {
    const canvas = $('cats').querySelector('canvas');
    const c = setup(canvas, 280), g = c.g, pw = c.pw;
    const S = dev.series;
    if (!S || !S.x.length) {
      g.fillStyle = '#5f6b76'; g.font = '13px system-ui, sans-serif';
      g.fillText('No category analysis for this device.', M.l + 10, M.t + 20);
      drawn.cats = null; canvas.dataset.drawn = '0'; cs = null; return;
    }
    const span = view[1] - view[0], X = (x) => M.l + (x - view[0]) / span * pw, dx = span / pw;
    const tot = (i) => { let t = 0; for (let k = 0; k < 7; k++) t += S.c[k][i]; return t; };
    // the points that hold in view: the last one at or before its start, and those inside
    let i0 = 0, i1 = S.x.length - 1;
    while (i0 < i1 && S.x[i0 + 1] <= view[0]) i0++;
    while (i1 > i0 && S.x[i1] >= view[1]) i1--;
    // Steps, one a pixel column (columns that show the same point merged): the point with
    // the most allocated among those that hold in the column (the one carried in and those
    // inside, also several in one microsecond), so that a column's maximum is never lost,
    // a state is drawn only where it held, and a fill never has more vertices than the
    // chart has pixels.
    const steps = []; // [point, x0, x1] in data units
    {
      let p = i0;
      while (p <= i1 && S.x[p] < view[0]) p++; // the first point at or after the view's start
      for (let col = 0; col < pw; col++) {
        const xa = view[0] + col * dx, xb = col === pw - 1 ? view[1] : view[0] + (col + 1) * dx;
        while (p <= i1 && S.x[p] < xa) p++;
        let best = -1, bt = -1;
        // the point before holds at the column's start unless a point is exactly there
        if (p - 1 >= i0 && (p > i1 || S.x[p] > xa)) { best = p - 1; bt = tot(p - 1); }
        for (let q = p; q <= i1 && S.x[q] < xb; q++) { const t = tot(q); if (t > bt) { bt = t; best = q; } }
        if (best < 0) best = Math.max(i0, p - 1);
        const last = steps[steps.length - 1];
        if (last && last[0] === best) last[2] = xb; else steps.push([best, xa, xb]);
      }
    }
    let ymax = 1;
    for (const [i] of steps) ymax = Math.max(ymax, tot(i), S.r[i]);
    ymax *= 1.12;
    const Y = (v) => M.t + c.ph - v / ymax * c.ph;
    for (const r of dev.runs || []) {
      if (r[1] < view[0] || r[0] > view[1] || !PHASE_FILL[r[2]]) continue;
      g.fillStyle = PHASE_FILL[r[2]];
      const a = Math.max(M.l, X(r[0])), b = Math.min(M.l + pw, X(r[1]));
      // a phase narrower than a pixel column is not shaded: thousands of them a column (a
      // long trace zoomed out) stacked their tints into noise above the data
      if (b - a < 1) continue;
      g.fillRect(a, M.t, b - a, c.ph);
    }
    drawUserPhases(c, g, X, true);
    axes(c, view, ymax);
    drawOoms(c, g, X, false);
    const np = steps.length, base = new Float64Array(np);
    let polys = 0;
    for (let k = 0; k < 7; k++) {
      let any = false;
      for (const [i] of steps) if (S.c[k][i]) { any = true; break; }
      if (!any) continue;
      g.fillStyle = CAT_COLORS[k];
      g.beginPath();
      for (let j = 0; j < np; j++) {
        const y = Y(base[j] + S.c[k][steps[j][0]]);
        if (j === 0) g.moveTo(X(steps[j][1]), y); else g.lineTo(X(steps[j][1]), y);
        g.lineTo(X(steps[j][2]), y);
      }
      for (let j = np - 1; j >= 0; j--) { const y = Y(base[j]); g.lineTo(X(steps[j][2]), y); g.lineTo(X(steps[j][1]), y); }
      g.closePath(); g.fill(); polys++;
      for (let j = 0; j < np; j++) base[j] += S.c[k][steps[j][0]];
    }
    g.strokeStyle = '#1d2228'; g.lineWidth = 1;
    g.beginPath();
    for (let j = 0; j < np; j++) {
      const y = Y(S.r[steps[j][0]]);
      if (j === 0) g.moveTo(X(steps[j][1]), y); else g.lineTo(X(steps[j][1]), y);
      g.lineTo(X(steps[j][2]), y);
    }
    g.stroke();
    drawOoms(c, g, X, true);
    cs = { c, steps, ymax };
    let mx = 0;
    for (const [i] of steps) mx = Math.max(mx, tot(i));
    drawn.cats = { view: view.slice(), max: mx, steps: steps.map(([i, a, b]) => ({ k: S.k[i], x: S.x[i], x0: a, x1: b, total: tot(i), bytes: S.c.map((v) => v[i]) })) };
    canvas.dataset.drawn = String(polys);
    canvas.dataset.max = String(mx);
  }

  function hoverCats(ev) {
    if (!cs) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const px = ev.clientX - r.left - M.l;
    if (px < 0 || px > cs.c.pw) { hideTip(); return; }
    const x = view[0] + px / cs.c.pw * (view[1] - view[0]), S = dev.series;
    // the step drawn under the pointer: what the chart shows there, never another point
    let st = cs.steps[cs.steps.length - 1];
    for (const s of cs.steps) if (x >= s[1] && x < s[2]) { st = s; break; }
    const i = st[0];
    let t = 0; const lines = [];
    for (let k = 0; k < 7; k++) t += S.c[k][i];
    for (let k = 6; k >= 0; k--) if (S.c[k][i]) lines.push(CAT_LABELS[k] + ': ' + fmtBytes(S.c[k][i]) + ' (' + pct(S.c[k][i], t) + ')');
    let ph = 0;
    for (const rr of dev.runs || []) if (rr[0] <= x && x < rr[1]) ph = rr[2];
    lines.push('allocated: ' + fmtBoth(t));
    lines.push('reserved: ' + fmtBytes(S.r[i]));
    lines.push('phase: ' + PHASE_LABELS[ph] + '; the state after event ' + S.k[i] + (S.k[i] >= 0 ? ' (' + fmtX(S.x[i]) + ')' : ''));
    for (const u of dev.uphases || []) if (u[0] <= x && x <= u[1]) lines.push('your phase: ' + u[2]);
    showTip(ev, fmtX(x), lines);
  }

  // ---- view 3: the segment timeline ----
  let sg = null;
  function drawSegtl() {
    const canvas = $('segtl').querySelector('canvas');
    const T = dev.segtl;
    if (!T || !dev.lod) { sg = null; return; }
    const c = setup(canvas, 220), g = c.g, pw = c.pw;
    const cols = columns(pw), span = view[1] - view[0], X = (x) => M.l + (x - view[0]) / span * pw;
    let ymax = 1;
    for (let i = 0; i < pw; i++) ymax = Math.max(ymax, cols.rmax[i]);
    ymax *= 1.12;
    axes(c, view, ymax);
    drawOoms(c, g, X, false);
    const Y = (v) => M.t + c.ph - v / ymax * c.ph;
    // per column: the segments that hold when its reserved is most (the event where it is)
    const fixed = T.fixed.slice().sort((a, b) => a[4] - b[4]);
    const bw = (dev.x1 - dev.x0) / T.buckets, stepsAt = (s, x) => {
      const b = Math.max(0, Math.min(T.buckets - 1, Math.floor(x / bw)));
      let v = 0;
      for (const st of s.steps) { if (st[0] > b) break; v = st[1]; }
      return v;
    };
    const parts = []; // per column: [[bytes, kind, index]]
    for (let x = 0; x < pw; x++) {
      const k = cols.kr[x], xm = view[0] + (x + 0.5) / pw * span, pc = [];
      T.spaces.forEach((s, i) => { const v = stepsAt(s, xm); if (v) pc.push([v, 1, i]); });
      fixed.forEach((f, i) => { if (f[5] <= k && (f[6] < 0 || k < f[6])) pc.push([f[2], 0, i]); });
      parts.push(pc);
    }
    const colorOf = (kind, i) => kind ? (T.spaces[i].small ? '#6baed6' : '#3182bd') : shade(fixed[i][3] ? '#74c476' : '#31a354', i);
    for (let x = 0; x < pw; x++) {
      let acc = 0;
      for (const [v, kind, i] of parts[x]) {
        g.fillStyle = colorOf(kind, i);
        const y0 = Y(acc), y1 = Y(acc + v);
        g.fillRect(M.l + x, y1, 1, Math.max(0.5, y0 - y1));
        acc += v;
      }
    }
    g.strokeStyle = '#1d2228'; g.lineWidth = 1.2;
    g.beginPath();
    for (let x = 0; x < pw; x++) { const y = Y(cols.rmax[x]); x ? g.lineTo(M.l + x, y) : g.moveTo(M.l, y); g.lineTo(M.l + x + 1, y); }
    g.stroke();
    drawOoms(c, g, X, true);
    sg = { c, pw, parts, Y, ymax, fixed, cols };
    let mx = 0;
    for (let i = 0; i < pw; i++) mx = Math.max(mx, cols.rmax[i]);
    drawn.segtl = { view: view.slice(), max: mx, segments: T.fixed.length + T.spaces.length };
    canvas.dataset.drawn = String(T.fixed.length + T.spaces.length);
    canvas.dataset.max = String(mx);
  }
  function hoverSegtl(ev) {
    if (!sg) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = Math.floor(ev.clientX - r.left - M.l), y = ev.clientY - r.top;
    if (x < 0 || x >= sg.pw) { hideTip(); return; }
    const v = (M.t + sg.c.ph - y) / sg.c.ph * sg.ymax;
    let acc = 0;
    for (const [b, kind, i] of sg.parts[x]) {
      if (v >= acc && v < acc + b) {
        if (kind) { const s = dev.segtl.spaces[i]; showTip(ev, 'expandable segments: ' + fmtBytes(b) + ' mapped', [(s.small ? 'small' : 'large') + ' pool, stream ' + s.stream, 'lowest page ' + hex(s.base)]); }
        else { const f = sg.fixed[i]; showTip(ev, 'segment ' + hex(f[4]) + ': ' + fmtBoth(f[2]), [(f[3] ? 'small' : 'large') + ' pool', 'from ' + (f[5] < 0 ? 'before the trace' : fmtX(f[0]) + ' (event ' + f[5] + ')') + ' to ' + (f[6] < 0 ? 'the end' : fmtX(f[1]) + ' (event ' + f[6] + ')')]); }
        return;
      }
      acc += b;
    }
    showTip(ev, fmtX(view[0] + (x + 0.5) / sg.pw * (view[1] - view[0])), ['reserved: up to ' + fmtBoth(sg.cols.rmax[x])]);
  }

  // ---- zoom and pan (the three time charts share one view) ----
  function zoomable(id, hover) {
    const box = $(id), canvas = box.querySelector('canvas'), sel = box.querySelector('.sel');
    let start = null, mode = null, moved = false, v0 = null;
    const px = (ev) => ev.clientX - canvas.getBoundingClientRect().left - M.l;
    const pwOf = () => Math.max(10, Math.floor(canvas.clientWidth - M.l - M.r));
    canvas.addEventListener('mousedown', (ev) => { start = px(ev); mode = ev.shiftKey ? 'select' : 'pan'; moved = false; v0 = view.slice(); ev.preventDefault(); });
    window.addEventListener('mousemove', (ev) => {
      if (start === null) return;
      const d = px(ev) - start;
      if (Math.abs(d) >= 3) moved = true;
      if (mode === 'select') {
        const a = Math.min(start, px(ev)), b = Math.max(start, px(ev));
        sel.style.display = 'block'; sel.style.left = (M.l + Math.max(0, a)) + 'px';
        sel.style.width = Math.max(0, b - Math.max(0, a)) + 'px';
      } else if (moved) {
        const span = v0[1] - v0[0];
        let a = v0[0] - d / pwOf() * span;
        a = Math.max(dev.x0, Math.min(dev.x1 - span, a));
        setView(a, a + span);
      }
    });
    window.addEventListener('mouseup', (ev) => {
      if (start === null) return;
      const a = start, b = px(ev), pw = pwOf(), was = mode;
      start = null; mode = null; sel.style.display = 'none';
      if (!moved) { pickEventAt(Math.floor(a)); return; }
      if (was === 'select') {
        const span = view[1] - view[0];
        setView(view[0] + Math.max(0, Math.min(a, b)) / pw * span, view[0] + Math.min(pw, Math.max(a, b)) / pw * span);
      }
    });
    canvas.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const pw = pwOf(), f = Math.max(0, Math.min(1, px(ev) / pw)), span = view[1] - view[0];
      const z = Math.exp((ev.deltaY || 0) * 0.0015), ns = Math.min(dev.x1 - dev.x0, Math.max(1, span * z));
      const at = view[0] + f * span;
      let a = at - f * ns;
      a = Math.max(dev.x0, Math.min(dev.x1 - ns, a));
      setView(a, a + ns);
    }, { passive: false });
    canvas.addEventListener('dblclick', () => setView(dev.x0, dev.x1));
    canvas.addEventListener('mousemove', (ev) => { if (start === null) hover(ev); });
    canvas.addEventListener('mouseleave', hideTip);
  }
  // a click on a time chart shows the allocator's state where that column's most held
  function pickEventAt(col) {
    if (!tl || col < 0 || col >= tl.pw) return;
    showState(tl.cols.k[col]);
  }

  // ---- view 4: at the peak ----
  function dominant(cats) {
    if (!cats) return [7, 1];
    let best = 6, t = 0;
    cats.forEach((b, k) => { t += b; if (b > cats[best]) best = k; });
    return [best, t ? cats[best] / t : 1];
  }
  function drawPeakTable() {
    const p = dev.peak, box = $('peak-table');
    box.textContent = '';
    $('peak-hint').textContent = 'What is alive at the peak (' + fmtBoth(p.bytes) + ' ' +
      (!dev.has_trace ? 'in the snapshot, which has no trace' : p.k < 0 ? 'at the start of the trace' : 'at ' + fmtX(p.x) + ', event ' + p.k) +
      (p.phase && dev.has_trace ? ', during ' + phaseLabel(p.phase) : '') + (p.uphase ? ', in your phase ' + p.uphase : '') +
      (p.iteration ? ' (iteration ' + p.iteration + ' of ' + group3((dev.iterations || []).length) + ')' : '') +
      '), ' + group3(p.n_live) + ' allocations in ' + group3(dev.at_peak_groups) + ' stacks, grouped by their whole stack as `gpumem snapshot peak` groups them. Sizes are the bytes the trace records (requested), below what max_memory_allocated() counts after rounding. Click a row for its stack.';
    if (!dev.at_peak.length) { box.appendChild(el('p', { class: 'empty' }, 'Nothing is alive at the peak.')); drawn.peak = 0; return; }
    const tb = el('tbody');
    const maxb = dev.at_peak[0][0];
    for (const r of dev.at_peak) {
      const [cat, share] = dominant(r[3]);
      const mixed = r[3] && share < 0.999;
      const row = el('tr', { class: 'row' },
        el('td', { class: 'num' }, el('span', { class: 'bar', style: 'width:' + Math.max(1, Math.round(60 * r[0] / maxb)) + 'px' }), pct(r[0], p.bytes)),
        el('td', { class: 'num' }, fmtBytes(r[0])),
        el('td', { class: 'num' }, group3(r[0])),
        el('td', { class: 'num' }, group3(r[1])),
        el('td', null, el('span', { class: 'chip', style: 'background:' + catColor(cat) }), CAT_LABELS[cat] + (mixed ? ' and others' : '')),
        el('td', { class: 'where' }, whereText(r[2])));
      let open = null;
      row.addEventListener('click', () => {
        if (open) { open.remove(); open = null; return; }
        open = el('tr', { class: 'stack' }, el('td', { colspan: '6' }, stackList(r[2], 60)));
        row.after(open);
      });
      const catLines = r[3] ? r[3].map((b, k) => [b, k]).filter((x) => x[0]).map(([b, k]) => CAT_LABELS[k] + ': ' + fmtBytes(b)) : [];
      row.addEventListener('mousemove', (ev) => showTip(ev, fmtHover(r[0]), [group3(r[1]) + ' allocation(s), ' + pct(r[0], p.bytes) + ' of the peak'].concat(catLines), r[2]));
      row.addEventListener('mouseleave', hideTip);
      tb.appendChild(row);
    }
    if (dev.at_peak_rest_count) tb.appendChild(el('tr', null, el('td', { class: 'num' }, pct(dev.at_peak_rest_bytes, p.bytes)),
      el('td', { class: 'num' }, fmtBytes(dev.at_peak_rest_bytes)), el('td', { class: 'num' }, group3(dev.at_peak_rest_bytes)),
      el('td', { class: 'num' }, group3(dev.at_peak_rest_count)), el('td', null, ''), el('td', { class: 'empty' }, 'smaller groups')));
    box.appendChild(el('table', null, el('thead', null, el('tr', null, el('th', { class: 'num' }, 'share'),
      el('th', { class: 'num' }, 'size'), el('th', { class: 'num' }, 'bytes'), el('th', { class: 'num' }, 'allocations'),
      el('th', null, 'category'), el('th', null, 'where (first user frame)'))), tb));
    drawn.peak = dev.at_peak.length;
  }

  // ---- view 5: icicle of what is alive at the peak ----
  let fl = null;
  function flameTree() {
    const root = { name: 'alive at the peak', full: 'everything alive at the peak', lib: false, bytes: 0, kids: new Map(), stack: null };
    const add = (node, path, bytes, stack) => {
      node.bytes += bytes;
      let n = node;
      for (const [name, full, lib] of path) {
        if (!n.kids.has(full)) n.kids.set(full, { name, full, lib, bytes: 0, kids: new Map(), parent: n, stack });
        n = n.kids.get(full);
        n.bytes += bytes;
      }
    };
    for (const r of dev.at_peak) {
      const fr = stackFrames(r[2]).slice().reverse().map((i) => [short(R.frames[i]), frameText(R.frames[i]), !R.frames[i][3]]);
      add(root, fr.length ? fr : [['(no stack recorded)', '(no stack recorded)', true]], r[0], r[2]);
    }
    if (dev.at_peak_rest_bytes) add(root, [['(smaller groups)', 'the groups after the ' + dev.at_peak.length + ' largest', true]], dev.at_peak_rest_bytes, null);
    return root;
  }
  function drawFlame(focus) {
    const canvas = $('flame').querySelector('canvas');
    if (!dev.at_peak.length) { const c = setup(canvas, 30); c.g.fillStyle = '#5f6b76'; c.g.font = '13px system-ui, sans-serif'; c.g.fillText('Nothing is alive at the peak.', 10, 20); fl = null; drawn.flame = null; return; }
    const root = fl && fl.dev === dev ? fl.root : flameTree();
    focus = focus || root;
    let depth = 0;
    const measure = (n, d) => { depth = Math.max(depth, d); for (const k of n.kids.values()) measure(k, d + 1); };
    measure(focus, 0);
    const RH = 18, rows = Math.min(depth + 1, 40);
    const c = setup(canvas, rows * RH + 4), g = c.g, W = c.w - 8;
    const boxes = [];
    const draw = (n, x, w, d) => {
      if (d >= rows || w < 0.5) return;
      const col = n === focus && focus !== root ? '#c9d3dd' : d === 0 ? '#9aa5b1' : shade(n.lib ? '#e6a04a' : '#e5604a', d);
      g.fillStyle = col; g.fillRect(4 + x, 2 + d * RH, Math.max(0.5, w - 0.5), RH - 1);
      if (w > 40) { g.fillStyle = '#1d2228'; g.font = '11px system-ui, sans-serif'; g.textBaseline = 'middle'; g.textAlign = 'left'; g.save(); g.beginPath(); g.rect(4 + x, 2 + d * RH, w - 2, RH); g.clip(); g.fillText(n.name + ' ' + fmtBytes(n.bytes), 7 + x, 2 + d * RH + RH / 2); g.restore(); }
      boxes.push([4 + x, 2 + d * RH, w, n]);
      let off = 0;
      const kids = Array.from(n.kids.values()).sort((a, b) => b.bytes - a.bytes || (a.full < b.full ? -1 : 1));
      for (const k of kids) { const kw = w * k.bytes / n.bytes; draw(k, x + off, kw, d + 1); off += kw; }
    };
    draw(focus, 0, W, 0);
    fl = { dev, root, focus, boxes };
    drawn.flame = { root: root.bytes, focus: focus.bytes, rows };
    canvas.dataset.drawn = String(boxes.length);
    canvas.dataset.root = String(root.bytes);
  }
  function flameAt(ev) {
    if (!fl) return null;
    const r = ev.currentTarget.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    for (const b of fl.boxes) if (x >= b[0] && x < b[0] + b[2] && y >= b[1] && y < b[1] + 18) return b[3];
    return null;
  }

  // ---- view 6: the allocator's state at an event ----
  // Pages of segment ids, as the library keeps them: sorted, disjoint, touching ones merged.
  function addRange(rs, a, s) {
    if (!s) return;
    let e = a + s, i = 0;
    while (i < rs.length && rs[i][0] + rs[i][1] < a) i++;
    let j = i;
    for (; j < rs.length && rs[j][0] <= e; j++) { a = Math.min(a, rs[j][0]); e = Math.max(e, rs[j][0] + rs[j][1]); }
    rs.splice(i, j - i, [a, e - a]);
  }
  function subRange(rs, a, s) {
    const e = a + s, out = [];
    for (const [x, n] of rs) {
      const xe = x + n;
      if (xe <= a || x >= e) { out.push([x, n]); continue; }
      if (x < a) out.push([x, a - x]);
      if (xe > e) out.push([e, xe - e]);
    }
    rs.length = 0; rs.push(...out);
  }
  // The state after event k: {k, exact, reserved, segments: [[addr, size, stream, flags,
  // [[page addr, size]], [[offset, size, bytes, cat, stack, pending]]]]} (the form of the
  // library's gm_layout_at, which the browser test compares it with).  An event outside the
  // page's windows gives the nearest event whose state the page holds (exact false).
  function stateAt(k) {
    const S = dev.state;
    if (!S) return null;
    const W = S.windows;
    let wi = W.findIndex((w) => w[0] <= k && k <= w[1]), want = k;
    if (wi < 0) {
      let best = 0, bd = Infinity;
      W.forEach((w, i) => { const d = Math.min(Math.abs(k - w[0]), Math.abs(k - w[1])); if (d < bd) { bd = d; best = i; } });
      wi = best; k = Math.abs(k - W[best][0]) <= Math.abs(k - W[best][1]) ? W[best][0] : W[best][1];
    }
    const pages = new Map(), get = (id) => { if (!pages.has(id)) pages.set(id, []); return pages.get(id); };
    for (const [id, a, s] of S.starts[wi]) addRange(get(id), a, s);
    for (const ch of S.changes) {
      if (ch[0] <= W[wi][0] || ch[0] > k) continue;
      if (ch[2] > 0) addRange(get(ch[1]), ch[3], ch[4]); else subRange(get(ch[1]), ch[3], ch[4]);
    }
    const segs = [];
    for (const [id, rs] of pages) {
      if (!rs.length) continue;
      const sp = S.spaces[id];
      if (sp[2] & 2) for (const r of rs) segs.push([r[0], r[1], sp[1], sp[2], [[r[0], r[1]]], []]);
      else { const a = Math.min(sp[0], rs[0][0]); segs.push([a, rs[rs.length - 1][0] + rs[rs.length - 1][1] - a, sp[1], sp[2], rs.map((r) => [r[0], r[1]]), []]); }
    }
    segs.sort((p, q) => p[0] - q[0]);
    const live = S.A.filter((a) => a[5] <= k && (a[7] < 0 || a[7] > k)).sort((p, q) => p[0] - q[0]);
    let outside = 0;
    for (const a of live) {
      let lo = 0, hi = segs.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (segs[mid][0] <= a[0]) lo = mid + 1; else hi = mid; }
      const s = lo > 0 ? segs[lo - 1] : null, r = s && s[4].find((x) => a[0] >= x[0] && a[0] - x[0] < x[1]);
      if (!r) { outside++; continue; }
      const size = Math.min(a[1], r[0] + r[1] - a[0]);
      s[5].push([a[0] - s[0], size, Math.min(a[2], size), a[3], a[4], a[6] >= 0 && a[6] <= k ? 1 : 0]);
    }
    let reserved = 0;
    for (const s of segs) for (const r of s[4]) reserved += r[1];
    return { k, want, exact: k === want, reserved, segments: segs, outside };
  }
  let seg = null, stateK = null;
  function stateLabel(m) {
    const w = [];
    if (m[1] & 2) w.push('the peak');
    if (m[1] & 4) w.push('out of memory');
    if (m[1] & 8 && !(m[1] & 2)) {
      const it = (dev.iterations || []).find((t) => t.peak_k === m[0]);
      w.push(it ? 'peak of iteration ' + it.n + ' of ' + group3(dev.iterations.length) : 'peak of an iteration');
    }
    if (m[1] & 1) w.push(dev.has_trace ? 'end of the trace (the snapshot)' : 'the snapshot');
    const x = xOfK(m[0]);
    return (m[0] < 0 ? 'start, ' : Number.isFinite(x) ? fmtX(Math.max(0, x)) + ', ' : '') + 'event ' + m[0] + ': ' + w.join(', ');
  }
  function xOfK(k) { // the x of an event the page names (the marks, the iterations, the peak)
    if (k === dev.peak.k) return dev.peak.x;
    for (const o of dev.ooms || []) if (o.k === k) return o.x;
    for (const it of dev.iterations || []) if (it.peak_k === k) return it.peak_x;
    if (dev.x_unit !== 'us') return k;
    const S = dev.series;
    if (S) for (let i = 0; i < S.k.length; i++) if (S.k[i] === k) return S.x[i];
    return NaN;
  }
  function showState(k) {
    stateK = k;
    $('event').value = String(k);
    const ms = $('moment'), mi = (dev.marks || []).findIndex((m) => m[0] === k);
    ms.value = mi >= 0 ? String(mi) : '';
    drawSegments();
  }
  function drawSegments() {
    const canvas = $('segments').querySelector('canvas');
    const sum = $('seg-summary'), note = $('state-note');
    sum.textContent = ''; note.textContent = '';
    const st = stateK === null ? null : stateAt(stateK);
    if (!st) {
      const c = setup(canvas, 40);
      c.g.fillStyle = '#5f6b76'; c.g.font = '13px system-ui, sans-serif';
      c.g.fillText(dev.state === null ? 'The allocator state needs the analysis (the report was written with --no-analysis).' : 'No state.', 10, 24);
      drawn.segments = null; canvas.dataset.drawn = '0'; seg = null; return;
    }
    const S = dev.state;
    note.textContent = st.exact ? (S.every_event ? 'the state at every event is in this page' : 'exact (event ' + st.k + ' is in a window the page keeps)')
      : 'event ' + st.want + ' is not in the windows this page keeps (' + S.windows.length + ' windows around the peak, the OOMs and spread over the trace, within its data budget); showing the nearest kept event, ' + st.k;
    if (!st.exact) $('event').value = String(st.k);
    if (!st.segments.length) {
      const c = setup(canvas, 40);
      c.g.fillStyle = '#5f6b76'; c.g.font = '13px system-ui, sans-serif';
      c.g.fillText('No segments after event ' + st.k + '.', 10, 24);
      drawn.segments = { k: st.k, segments: 0 }; canvas.dataset.drawn = '0'; seg = null; return;
    }
    let largest = 0, nblocks = 0, occupied = 0, requested = 0;
    for (const s of st.segments) {
      for (const r of s[4]) { // free ranges inside each run of pages
        let pos = r[0];
        for (const b of s[5]) { const a = s[0] + b[0]; if (a < r[0] || a >= r[0] + r[1]) continue; largest = Math.max(largest, a - pos); pos = Math.max(pos, a + b[1]); }
        largest = Math.max(largest, r[0] + r[1] - pos);
      }
      for (const b of s[5]) { nblocks++; occupied += b[1]; requested += b[2]; }
    }
    const waste = occupied - requested, free = st.reserved - occupied;
    for (const [k, v, col] of [['reserved', st.reserved, '#1d2228'], ['allocated (requested)', requested, '#1f77b4'],
      ['rounding and split waste', waste, '#d62728'], ['free in segments', free, '#dfe3e8'], ['largest free range', largest, null]]) {
      sum.appendChild(el('span', null, col ? el('span', { class: 'chip', style: 'background:' + col }) : null, k + ': ' + fmtBytes(v)));
    }
    sum.appendChild(el('span', null, group3(st.segments.length) + ' segments, ' + group3(nblocks) + ' blocks after event ' + st.k + (st.outside ? ', ' + st.outside + ' allocation(s) in no segment' : '')));
    const total = st.segments.reduce((a, s) => a + s[1], 0);
    const rows = Math.max(4, Math.min(28, Math.ceil(st.segments.length / 3) + 4)), rh = 16;
    const c = setup(canvas, rows * rh + 6), g = c.g, W = c.w - 8;
    const perPx = total / (rows * W);
    const pos = (byte) => { const p = byte / perPx; return [4 + (p % W), 3 + Math.floor(p / W) * rh]; };
    // bytes [a, b) wrapping over rows; anything in a pixel shows (never less than a pixel)
    const span = (a, b, color) => {
      let p = Math.max(0, a / perPx); const e = Math.min(b, total) / perPx;
      g.fillStyle = color;
      for (let guard = 0; p < e && guard <= rows; guard++) {
        const row = Math.floor(p / W), x = p - row * W, w = Math.min(e - p, W - x);
        g.fillRect(4 + x, 3 + row * rh, Math.max(w, 0.6), rh - 3);
        p = (row + 1) * W;
        if (w < W - x) break;
      }
    };
    let base = 0;
    const starts = [];
    for (const s of st.segments) {
      starts.push(base);
      // unmapped holes (a cudaMalloc'ed segment whose pages an inconsistent file cut)
      g.save(); span(base, base + s[1], '#f1e7d8'); g.restore();
      for (const r of s[4]) span(base + r[0] - s[0], base + r[0] - s[0] + r[1], '#e6e9ed');
      for (const b of s[5]) {
        span(base + b[0], base + b[0] + b[2], b[5] ? '#8c564b' : catColor(b[3]));
        if (b[1] > b[2]) span(base + b[0] + b[2], base + b[0] + b[1], '#d62728');
        if (b[1] / perPx >= 4) { const [x, y] = pos(base + b[0]); g.fillStyle = 'rgba(255,255,255,0.8)'; g.fillRect(x, y, 1, rh - 3); }
      }
      base += s[1];
    }
    g.fillStyle = '#1d2228';
    for (const s0 of starts) { const [x, y] = pos(s0); g.fillRect(x, y - 1, 1.2, rh - 1); }
    seg = { st, W, rh, perPx, starts };
    drawn.segments = { k: st.k, exact: st.exact, segments: st.segments.length, blocks: nblocks };
    canvas.dataset.drawn = String(st.segments.length);
  }
  function hoverSegments(ev) {
    if (!seg) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = ev.clientX - r.left - 4, y = ev.clientY - r.top - 3;
    if (x < 0 || x >= seg.W || y < 0) { hideTip(); return; }
    const byte = (Math.floor(y / seg.rh) * seg.W + x) * seg.perPx;
    let i = 0;
    while (i + 1 < seg.starts.length && seg.starts[i + 1] <= byte) i++;
    const s = seg.st.segments[i];
    if (!s || byte >= seg.starts[i] + s[1]) { hideTip(); return; }
    const o = byte - seg.starts[i];
    const head = 'segment ' + hex(s[0]) + ': ' + fmtBytes(s[1]) + ', ' + (s[3] & 1 ? 'small' : 'large') + ' pool' + (s[3] & 2 ? ', expandable (one run of mapped pages)' : '') + (s[3] & 4 ? ', private pool (a CUDA graph\'s or a MemPool)' : '') + ', stream ' + s[2];
    for (const b of s[5]) {
      if (o >= b[0] && o < b[0] + b[1]) {
        showTip(ev, fmtHover(b[2]), [
          'category: ' + CAT_LABELS[b[3]] + (b[5] ? ', freed but pending on another stream' : ''),
          'block: ' + fmtBytes(b[1]) + ' at ' + hex(s[0] + b[0]) + (b[1] > b[2] ? ', waste ' + fmtBytes(b[1] - b[2]) : ''),
          head], b[4]);
        return;
      }
    }
    showTip(ev, 'free', [head]);
  }

  // ---- view 7: findings ----
  function finding(cls, title, ...kids) {
    return el('div', { class: 'finding ' + cls }, el('h3', null, title), ...kids);
  }
  const LEAK_ROWS = 20;
  function oomText(o) {
    return 'Requested ' + fmtBoth(o.requested) + '; CUDA reported ' + fmtBytes(o.device_free) + ' free; the allocator had reserved ' +
      fmtBytes(o.reserved) + ' with ' + fmtBytes(o.reserved_unallocated) + ' not allocated; largest free range ' + fmtBytes(o.largest_free) + '.';
  }
  // settings as one row per key, nested dicts folded ("roundup_power2_divisions: 0 for
  // all 16 sizes" rather than sixteen rows)
  function foldSettings(settings) {
    const groups = new Map(), out = [];
    for (const [k, v] of settings) {
      const dot = k.indexOf('.');
      if (dot < 0) { out.push([k, v]); continue; }
      const p = k.slice(0, dot);
      if (!groups.has(p)) { groups.set(p, []); out.push([p, null]); }
      groups.get(p).push([k.slice(dot + 1), v]);
    }
    return out.map(([k, v]) => {
      if (v !== null) return [k, v];
      const g = groups.get(k), vals = new Map();
      for (const [, x] of g) vals.set(x, (vals.get(x) || 0) + 1);
      if (vals.size === 1) return [k, g[0][1] + (g.length > 1 ? ' for all ' + g.length + ' (' + g[0][0] + ' to ' + g[g.length - 1][0] + ')' : ' for ' + g[0][0])];
      let common = null, cn = 0;
      for (const [x, n] of vals) if (n > cn) { common = x; cn = n; }
      return [k, g.filter((e) => e[1] !== common).map((e) => e[0] + '=' + e[1]).join(' ') + '; ' + common + ' for the other ' + cn];
    });
  }
  function drawFindings() {
    const box = $('findings');
    box.textContent = '';
    let n = 0;
    const p = dev.peak;
    for (const o of DEVS) {
      if (o === dev) continue;
      const nooms = (o.ooms || []).length, nleaks = (o.leaks || []).length;
      if (!nooms && !nleaks) continue;
      box.appendChild(finding('warn', devName(o) + ' has ' + (nooms ? nooms + ' out-of-memory event(s)' : '') +
        (nooms && nleaks ? ' and ' : '') + (nleaks ? nleaks + ' leak(s)' : ''),
        el('p', null, el('button', { onclick: () => selectDevice(DEVS.indexOf(o)) }, 'show ' + devName(o)))));
      n++;
    }
    for (const o of dev.ooms || []) {
      box.appendChild(finding('warn', 'Out of memory at ' + fmtX(o.x) + ' (event ' + o.k + ', ' + phaseLabel(o.phase) + '): ' + o.verdict,
        el('p', null, oomText(o)), el('p', null, o.advice), stackList(o.stack, 30)));
      n++;
    }
    if (dev.at_peak_cat) {
      const parts = [];
      dev.at_peak_cat.forEach((b, k) => { if (b) parts.push([b, k]); });
      parts.sort((a, b) => b[0] - a[0]);
      const ul = el('ul');
      for (const [b, k] of parts) ul.appendChild(el('li', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k] + ': ' + fmtBytes(b) + ' (' + pct(b, p.bytes) + ')'));
      box.appendChild(finding('', 'The peak: ' + fmtBoth(p.bytes) + (p.phase && dev.has_trace ? ' during ' + phaseLabel(p.phase) : '') + (p.uphase ? ', in your phase "' + p.uphase + '"' : ''),
        ul, el('p', null, 'Explained by stack frames and lifetimes: ' + pct(p.bytes - dev.at_peak_unexplained, p.bytes) +
          '; unexplained: ' + fmtBytes(dev.at_peak_unexplained) + (dev.at_peak_lifetime_only ? '; from lifetime alone: ' + fmtBytes(dev.at_peak_lifetime_only) : '') + '.')));
      n++;
    }
    // leaks: one finding per cause (the library groups the sites), the sites in a table
    // (click for a stack)
    for (const l of dev.leaks || []) {
      const ls = (l.sites || []).map((x) => ({ per_iteration: x[0], total: x[1], count: x[2], iterations: x[3], stack: x[4], cat: l.cat }));
      const tb = el('tbody');
      const addRow = (l) => {
        const row = el('tr', { class: 'row' }, el('td', { class: 'num' }, fmtBytes(l.per_iteration)), el('td', { class: 'num' }, fmtBytes(l.total)),
          el('td', { class: 'num' }, group3(l.count)), el('td', { class: 'num' }, String(l.iterations)),
          el('td', null, el('span', { class: 'chip', style: 'background:' + catColor(l.cat) }), CAT_LABELS[l.cat]),
          el('td', { class: 'where' }, whereText(l.stack)));
        let open = null;
        row.addEventListener('click', () => {
          if (open) { open.remove(); open = null; return; }
          open = el('tr', { class: 'stack' }, el('td', { colspan: '6' }, stackList(l.stack, 60)));
          row.after(open);
        });
        row.addEventListener('mousemove', (ev) => showTip(ev, fmtBytes(l.per_iteration) + ' per iteration', [group3(l.count) + ' allocation(s) still alive, ' + fmtBytes(l.total)], l.stack));
        row.addEventListener('mouseleave', hideTip);
        tb.appendChild(row);
      };
      ls.slice(0, LEAK_ROWS).forEach(addRow);
      const rest = ls.length > LEAK_ROWS ? el('button', {
        onclick: () => { ls.slice(LEAK_ROWS).forEach(addRow); rest.remove(); },
      }, 'show all ' + group3(ls.length) + ' sites') : null;
      box.appendChild(finding('warn', 'Leak: ' + fmtBytes(l.per_iteration) + ' more every iteration from ' + ls.length + ' allocation site(s) (' + l.kind.replace(/_/g, ' ') + ', iterations ' + l.first_iteration + ' to ' + l.last_iteration + ')',
        el('p', null, fmtBytes(l.total) + ' is still alive at the end. ' + l.advice),
        el('p', null, 'Where the largest part is allocated:'), stackList(l.stack, 14),
        el('div', { class: 'tablewrap' }, el('table', null, el('thead', null, el('tr', null, el('th', { class: 'num' }, 'per iteration'), el('th', { class: 'num' }, 'kept at the end'),
          el('th', { class: 'num' }, 'allocations'), el('th', { class: 'num' }, 'iterations'), el('th', null, 'category'), el('th', null, 'where (first user frame)'))), tb)),
        rest ? el('p', null, rest) : null));
      n++;
    }
    if (dev.leak_verdict === 'none' || dev.leak_verdict === 'too_few_iterations')
      box.appendChild(finding(dev.leak_verdict === 'none' ? 'ok' : '', dev.leak_verdict_text.charAt(0).toUpperCase() + dev.leak_verdict_text.slice(1) + '.'));
    if (dev.frag && dev.has_trace) {
      const f = dev.frag;
      const frac = f.reserved ? f.reserved_unallocated / f.reserved : 0;
      box.appendChild(finding(frac > 0.25 ? 'warn' : '', 'Fragmentation at the peak: ' + pct(f.reserved_unallocated, f.reserved) + ' of reserved memory is not allocated',
        el('p', null, 'Reserved ' + fmtBytes(f.reserved) + ', allocated ' + fmtBytes(f.allocated) + ' (rounded to 512 B), free inside segments ' + fmtBytes(f.reserved_unallocated) +
          ', largest free range ' + fmtBytes(f.largest_free) + '.'),
        frac > 0.25 && !settingOn('expandable_segments') ? el('p', null, 'Advice: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place instead of leaving free gaps between fixed-size segments; max_split_size_mb keeps large cached blocks from being split for small requests.') : null));
      n++;
    }
    if (dev.iterations && dev.iterations.length) {
      box.appendChild(iterationsFinding(dev.iterations));
      n++;
    }
    const md = R.meta, dl = el('dl', { class: 'meta' });
    const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
    add('file', R.title + ' (' + fmtBytes(md.file_size) + ')');
    add('format', md.generation + ' (PyTorch ' + md.torch + '), pickle protocol ' + md.protocol + (md.is_list ? ', segments only' : ''));
    add('devices', R.devices.length + ' (' + R.devices.map((d) => md.device_kind + ':' + d.device).join(', ') + ')');
    add('contents', group3(md.segments) + ' segments, ' + group3(md.blocks) + ' blocks, ' + group3(md.events) + ' trace events, ' + group3(md.frames) + ' frames, ' + group3(md.stacks) + ' stacks');
    if (md.has_time) add('time span', ((md.time_last_us - md.time_first_us) / 1e6).toFixed(3) + ' s from ' + new Date(md.time_first_us / 1000).toISOString());
    add('annotations', group3(md.annotations));
    if (md.trace_overflowed) add('warning', 'the trace ring buffer overflowed: the oldest events are missing');
    if (md.host_data) add('host memory', 'pinned CPU memory, in no device\'s figures: ' + fmtBytes(md.host_reserved || 0) + ' reserved, ' + fmtBytes(md.host_allocated || 0) + ' allocated, ' + group3(md.host_events || 0) + ' trace events');
    if (md.unknown_actions) add('unknown actions', group3(md.unknown_actions));
    add('this device', 'device ' + dev.device + ': ' + group3(dev.n_events) + ' events, ' + group3(dev.n_segments) + ' segments, reserved at the peak ' + fmtBytes(dev.peak.reserved) + ', highest reserved ' + fmtBytes(dev.peak.max_reserved));
    add('report', 'gpumem ' + D.gpumem_version + (md.has_analysis ? '' : ' (no analysis: categories unavailable)'));
    const sdl = el('dl', { class: 'meta' });
    const folded = foldSettings(R.settings);
    for (const [k, v] of folded) { sdl.appendChild(el('dt', null, k)); sdl.appendChild(el('dd', null, v)); }
    sdl.dataset.rows = String(folded.length);
    box.appendChild(el('div', { class: 'grid2' }, finding('', 'Snapshot', dl),
      finding('', 'Allocator settings', R.settings.length ? sdl : el('p', { class: 'empty' }, 'not recorded (PyTorch before 2.3)'))));
    box.dataset.drawn = String(n + 2);
  }
  const ITER_ALL = 20, ITER_OUTLIERS = 10;
  function median(v) {
    const s = v.slice().sort((a, b) => a - b);
    return s.length ? s[s.length >> 1] : 0;
  }
  function iterRows(its, idx) {
    const tb = el('tbody');
    for (const i of idx) {
      const it = its[i], prev = i ? its[i - 1].end : it.start;
      tb.appendChild(el('tr', null, el('td', { class: 'num' }, String(it.n)), el('td', { class: 'num' }, fmtX(it.x0)),
        el('td', { class: 'num' }, fmtBytes(it.peak)), el('td', null, phaseLabel(it.peak_phase)),
        el('td', { class: 'num' }, fmtBytes(it.end)), el('td', { class: 'num' }, (it.end >= prev ? '+' : '-') + fmtBytes(Math.abs(it.end - prev)))));
    }
    return el('div', { class: 'tablewrap' }, el('table', null, el('thead', null, el('tr', null,
      el('th', { class: 'num' }, '#'), el('th', { class: 'num' }, 'start'), el('th', { class: 'num' }, 'peak'), el('th', null, 'peak phase'),
      el('th', { class: 'num' }, 'alive at end'), el('th', { class: 'num' }, 'change'))), tb));
  }
  function iterationsFinding(its) {
    const all = its.map((_, i) => i);
    const title = group3(its.length) + ' training iteration(s)';
    if (its.length <= ITER_ALL) return finding('iters', title, iterRows(its, all));
    const peaks = its.map((it) => it.peak);
    const change = its.map((it, i) => it.end - (i ? its[i - 1].end : it.start));
    const mp = median(peaks), mc = median(change);
    let lo = peaks[0], hi = peaks[0];
    for (const b of peaks) { lo = Math.min(lo, b); hi = Math.max(hi, b); }
    const far = all.map((i) => Math.max(Math.abs(peaks[i] - mp), Math.abs(change[i] - mc)));
    const order = all.slice(1).filter((i) => far[i] > 0.01 * mp).sort((a, b) => far[b] - far[a] || a - b);
    const shown = [0].concat(order.slice(0, ITER_OUTLIERS)).sort((a, b) => a - b);
    const more = el('div');
    const toggle = el('button', {
      onclick: () => {
        if (more.firstChild) { more.textContent = ''; toggle.textContent = 'show all ' + group3(its.length) + ' iterations'; return; }
        more.appendChild(iterRows(its, all));
        toggle.textContent = 'hide the full table';
      },
    }, 'show all ' + group3(its.length) + ' iterations');
    return finding('iters', title,
      el('p', null, 'Peak per iteration: typically ' + fmtBytes(mp) + ' (from ' + fmtBytes(lo) + ' to ' + fmtBytes(hi) + '); memory alive at the end changes by ' +
        (mc >= 0 ? '+' : '-') + fmtBytes(Math.abs(mc)) + ' in a typical iteration. ' +
        (order.length ? order.length + ' iteration(s) differ from that by more than 1% of the typical peak; the first and the ' + Math.min(order.length, ITER_OUTLIERS) + ' that differ most:'
          : 'No iteration differs from that by more than 1% of the typical peak; the first:')),
      iterRows(its, shown), el('p', null, toggle), more);
  }
  function settingOn(key) {
    for (const [k, v] of R.settings) if (k === key) return v === 'True';
    return false;
  }

  // ---- the out-of-memory banner, the ranks ----
  function firstOom() {
    for (const d of DEVS) if ((d.ooms || []).length) return d;
    return null;
  }
  function drawBanner() {
    const b = $('banner'), d = firstOom();
    b.textContent = '';
    if (!d) { b.hidden = true; return; }
    const o = d.ooms[0], here = d === dev, n = DEVS.reduce((a, x) => a + (x.ooms || []).length, 0);
    const saved = dev; dev = d; const at = fmtX(o.x); dev = saved;
    b.appendChild(el('b', null, 'Out of memory on ' + devName(d) + ' at ' + at + ' (event ' + o.k + '): ' + o.verdict + '. '));
    b.appendChild(document.createTextNode(oomText(o) + (n > 1 ? ' (' + n + ' out-of-memory events in all.)' : '')));
    if (!here) b.appendChild(el('button', { onclick: () => selectDevice(DEVS.indexOf(d)) }, 'show ' + devName(d)));
    b.hidden = false;
    b.dataset.device = String(d.device);
    b.dataset.rank = String(d.rank);
  }
  function rankDevice(ri) {
    const r = D.ranks[ri], s = r.summary;
    return s ? r.devices.find((d) => d.device === s.device) : r.devices[0];
  }
  // A rank's allocated bytes over its run in n columns (each the most of what it covers):
  // from its device's buckets, or from its digest's series.
  function rankColumns(ri, n) {
    const r = D.ranks[ri], d = rankDevice(ri), out = new Array(n).fill(0);
    const src = d && d.lod ? d.lod.amax.slice(0, d.lod.n) : (r.digest ? r.digest.series : []);
    const m = src.length;
    if (!m) return null;
    for (let x = 0; x < n; x++) {
      const b0 = Math.floor(x / n * m), b1 = Math.max(b0, Math.ceil((x + 1) / n * m) - 1);
      let v = 0;
      for (let b = b0; b <= b1 && b < m; b++) v = Math.max(v, src[b]);
      out[x] = v;
    }
    return out;
  }
  // ranks x time, colour = memory (from GM_RANK_OUTLIERS_MIN = 16 ranks, where one
  // envelope a rank no longer fits on a screen)
  function drawHeatmap(order, peak) {
    const wrap = $('rank-heatmap-wrap'), cv = $('rank-heatmap').querySelector('canvas');
    wrap.hidden = false;
    const rowH = Math.max(1, Math.min(12, Math.floor(600 / order.length)));
    const c = setup(cv, order.length * rowH + 4), g = c.g, W = c.w - 8;
    let drawnRows = 0, hottest = 0;
    order.forEach((ri, row) => {
      const cols = rankColumns(ri, W);
      if (!cols) return;
      drawnRows++;
      for (let x = 0; x < W; x++) {
        const f = peak ? Math.min(1, cols[x] / peak) : 0;
        hottest = Math.max(hottest, cols[x]);
        g.fillStyle = 'rgb(' + Math.round(255 - 115 * f) + ',' + Math.round(255 - 255 * f) + ',' + Math.round(255 - 255 * f) + ')';
        g.fillRect(4 + x, 2 + row * rowH, 1, rowH);
      }
    });
    cv.dataset.rows = String(drawnRows);
    cv.dataset.max = String(hottest);
    cv.onmousemove = (ev) => {
      const row = Math.floor((ev.offsetY - 2) / rowH), ri = order[row];
      if (ri === undefined) { hideTip(); return; }
      const s = D.ranks[ri].summary;
      showTip(ev, 'rank ' + rankId(ri) + ' · ' + D.ranks[ri].title, [s ? 'peak ' + fmtBoth(s.peak) : 'no device'], null);
    };
    cv.onmouseleave = hideTip;
  }
  function drawRanks() {
    const sec = $('v-ranks');
    if (!multi) { sec.hidden = true; return; }
    sec.hidden = false;
    const ib = D.imbalance, box = $('imbalance'), tbox = $('ranks-table'), charts = $('ranks-charts');
    box.textContent = ''; tbox.textContent = ''; charts.textContent = '';
    if (ib) {
      const hi = D.ranks[ib.max_rank], lo = D.ranks[ib.min_rank];
      box.appendChild(finding(ib.ratio > 1.1 || ib.ratio === 0 ? 'warn' : 'ok', 'Imbalance: the highest peak is ' + (ib.ratio ? ib.ratio.toFixed(2) + '×' : 'more than') + ' the lowest',
        el('p', null, 'rank ' + rankId(ib.max_rank) + ' (' + hi.title + ', cuda:' + hi.summary.device + ') peaks at ' + fmtBoth(ib.max_peak) + ', rank ' + rankId(ib.min_rank) +
          ' (' + lo.title + ', cuda:' + lo.summary.device + ') at ' + fmtBoth(ib.min_peak) + ': ' + fmtBytes(ib.spread) + ' apart over ' + ib.ranks + ' ranks. ' +
          (ib.category_diff >= 0 ? 'The difference is mostly ' + CAT_LABELS[ib.category] + ': ' + fmtBytes(ib.category_diff) + ' more at the highest peak.' : 'The category that differs most is ' + CAT_LABELS[ib.category] + ': ' + fmtBytes(-ib.category_diff) + ' less at the highest peak.'))));
      box.dataset.ratio = String(ib.ratio);
      box.dataset.maxRank = String(ib.max_rank);
    }
    const job = D.job, ob = $('rank-outliers');
    ob.textContent = '';
    ob.hidden = !(job && job.outliers && job.outliers.length);
    if (!ob.hidden) {
      const peaks = D.ranks.map((r) => (r.summary ? r.summary.peak : null)).filter((v) => v !== null).sort((a, b) => a - b);
      const med = peaks.length % 2 ? peaks[(peaks.length - 1) / 2] : (peaks[peaks.length / 2 - 1] + peaks[peaks.length / 2]) / 2;
      const ul = el('ul');
      job.outliers.forEach((ri) => {
        const p = D.ranks[ri].summary.peak;
        ul.appendChild(el('li', null, 'rank ' + rankId(ri) + ' (' + D.ranks[ri].title + '): peak ' + fmtBoth(p) + ', ' + (p >= med ? '+' : '') + (100 * (p - med) / med).toFixed(1) + '% of the median ' + fmtBytes(med)));
      });
      ob.appendChild(finding('warn', job.outliers.length + ' outlier rank' + (job.outliers.length > 1 ? 's' : '') + ': a peak far from the others\'', ul));
      ob.dataset.ranks = job.outliers.map(rankId).join(',');
    }
    const order = D.ranks.map((r, ri) => ri).sort((a, b) => rankId(a) - rankId(b));
    if (D.ranks.length >= 16) drawHeatmap(order, job ? job.peak : 0);
    else $('rank-heatmap-wrap').hidden = true;
    const tb = el('tbody');
    let ymax = 1;
    D.ranks.forEach((r) => { if (r.summary) ymax = Math.max(ymax, r.summary.peak); });
    order.forEach((ri) => {
      const r = D.ranks[ri], s = r.summary, d = rankDevice(ri);
      const [cat] = s ? dominant(s.at_peak) : [7];
      const row = el('tr', { class: 'row' }, el('td', { class: 'num' }, String(rankId(ri))), el('td', { class: 'where' }, r.title + (r.digest ? ' (digest' + (r.digest.host ? ', ' + r.digest.host : '') + ')' : '')),
        el('td', null, s ? 'cuda:' + s.device : '-'), el('td', { class: 'num' }, s ? fmtBytes(s.peak) : '-'),
        el('td', { class: 'num' }, s ? fmtBytes(s.max_reserved) : '-'), el('td', null, s ? phaseLabel(s.phase) : '-'),
        el('td', null, el('span', { class: 'chip', style: 'background:' + catColor(cat) }), s ? CAT_LABELS[cat] : '-'));
      if (d) row.addEventListener('click', () => selectDevice(DEVS.indexOf(d)));
      tb.appendChild(row);
    });
    tbox.appendChild(el('table', null, el('thead', null, el('tr', null, el('th', { class: 'num' }, 'rank'), el('th', null, 'file'), el('th', null, 'device'),
      el('th', { class: 'num' }, 'peak'), el('th', { class: 'num' }, 'most reserved'), el('th', null, 'phase of the peak'), el('th', null, 'largest category at the peak'))), tb));
    // one envelope a rank, on one scale (below 16 ranks: the heatmap above beyond)
    if (D.ranks.length >= 16) return;
    D.ranks.forEach((r, ri) => {
      const d = rankDevice(ri);
      const cv = el('canvas'), wrap = el('div', { class: 'chart rank-chart' }, el('div', { class: 'lbl' }, 'rank ' + rankId(ri) + ' · ' + r.title + (d ? ' · cuda:' + d.device : '') + (r.summary ? ' · peak ' + fmtBytes(r.summary.peak) : '')), cv);
      charts.appendChild(wrap);
      if (!d || !d.lod) return;
      const c = setup(cv, 56), g = c.g, L = d.lod, W = c.w - 8, H = 50;
      g.fillStyle = '#9ecae1';
      let mx = 0;
      for (let x = 0; x < W; x++) {
        const b0 = Math.floor(x / W * L.n), b1 = Math.max(b0, Math.ceil((x + 1) / W * L.n) - 1);
        let m = 0;
        for (let b = b0; b <= b1 && b < L.n; b++) m = Math.max(m, L.amax[b]);
        mx = Math.max(mx, m);
        const h = m / ymax * H;
        g.fillRect(4 + x, 2 + H - h, 1, h);
      }
      cv.dataset.max = String(mx);
      cv.addEventListener('click', () => selectDevice(DEVS.indexOf(d)));
    });
  }

  // ---- legends, device selection ----
  // ---- the whole device: gpumem account of the same run ----
  const ACCOUNT_COLORS = { context: '#8c564b', modules: '#c49c94', graphs: '#e377c2', torch: '#1f77b4',
    nccl: '#2ca02c', cublas: '#ff7f0e', cublaslt: '#ffbb78', cudnn: '#9467bd', triton: '#17becf',
    other: '#bcbd22', unknown: '#7f7f7f', rounding: '#dbdb8d', not_seen: '#d62728' };
  // a term: [title, bytes, term, lib, source]
  function accountColor(t) {
    const k = t[2] === 'library' ? t[3] : t[2] === 'others' ? 'other' : t[2];
    return ACCOUNT_COLORS[k] || '#7f7f7f';
  }
  function drawAccount() {
    const box = $('account'), A = D.account;
    $('v-account').hidden = !A;
    drawn.account = null;
    if (!A) return;
    box.textContent = '';
    const equations = [];
    for (const p of A.processes) for (const d of p.devices) {
      const b = d.peak;
      if (!b) continue;
      const shown = b.terms.reduce((s, t) => s + Math.max(0, t[1]), 0);
      const total = Math.max(b.used || 0, shown, 1);
      const bar = el('div', { class: 'acct-bar' });
      for (const t of b.terms) {
        if (t[1] <= 0) continue;
        const seg = el('span', { class: 'acct-seg', style: 'width:' + (100 * t[1] / total).toFixed(3) + '%;background:' + accountColor(t) });
        seg.addEventListener('mousemove', (ev) => showTip(ev, t[0] + ': ' + fmtHover(t[1]), [t[4]], null));
        seg.addEventListener('mouseleave', hideTip);
        bar.appendChild(seg);
      }
      const sd = DEVS.find((x) => x.device === d.device);
      if (sd && sd.peak && sd.peak.max_reserved)
        bar.appendChild(el('span', { class: 'acct-mark', style: 'left:' + Math.min(100, 100 * sd.peak.max_reserved / total).toFixed(3) + '%',
          title: 'the snapshot\'s highest reserved on cuda:' + d.device + ': ' + fmtBoth(sd.peak.max_reserved) }));
      const rows = b.terms.map((t) => el('tr', null,
        el('td', null, el('span', { class: 'chip', style: 'background:' + accountColor(t) }), t[0]),
        el('td', { class: 'num' }, (t[1] < 0 ? '-' : '') + fmtBytes(Math.abs(t[1]))), el('td', { class: 'num' }, group3(t[1])),
        el('td', { class: 'where' }, t[4])));
      box.appendChild(el('div', { class: 'acct' },
        el('h3', null, 'process ' + p.pid + (p.rank >= 0 ? ' (rank ' + p.rank + ')' : '') + ', cuda:' + d.device + ' ' + d.name + ': device used ' +
          (b.used === null ? 'not read' : fmtBoth(b.used)) + ' at its peak, ' + b.t_s.toFixed(2) + ' s' + (p.disabled ? ' (accounting stopped early: incomplete)' : '')),
        bar,
        el('div', { class: 'tablewrap' }, el('table', null, el('thead', null, el('tr', null, el('th', null, 'term'), el('th', { class: 'num' }, 'size'),
          el('th', { class: 'num' }, 'bytes'), el('th', null, 'source'))), el('tbody', null, ...rows)))));
      equations.push({ pid: p.pid, device: d.device, used: b.used, sum: b.terms.reduce((s, t) => s + t[1], 0), terms: b.terms.length });
    }
    drawn.account = equations;
  }

  function legends() {
    const tlg = $('timeline-legend'), clg = $('cats-legend');
    tlg.textContent = ''; clg.textContent = '';
    const used = new Set(dev.bands.map((b) => b[5])), rest = dev.lod && dev.lod.rest;
    if (rest) rest.forEach((r, k) => { if (r) used.add(k); });
    for (let k = 0; k < 7; k++) if (used.has(k)) tlg.appendChild(el('span', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k]));
    tlg.appendChild(el('span', null, el('span', { class: 'chip', style: rest ? 'background:repeating-linear-gradient(135deg,' + CAT_COLORS[0] + 'dd 0 2px,' + CAT_COLORS[0] + '99 2px 5px)' : 'background:rgba(200,200,200,0.75)' }),
      rest ? 'smaller allocations, merged by category (hatched)' : 'smaller allocations, merged'));
    tlg.appendChild(el('span', null, '━ reserved'));
    tlg.appendChild(el('span', null, '─ least allocated in a column (where it varies)'));
    tlg.appendChild(el('span', { style: 'color:#d62728' }, '┆ peak'));
    if ((dev.ooms || []).length) tlg.appendChild(el('span', { style: 'color:#b00020' }, '┆ out of memory'));
    tlg.appendChild(el('span', { id: 'bands-note' }, bandsNote(dev.bands.length)));
    for (let k = 0; k < 7; k++) clg.appendChild(el('span', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k]));
    for (let p = 1; p < 4; p++) clg.appendChild(el('span', null, el('span', { class: 'chip', style: 'border:1px solid #ccc;background:' + PHASE_FILL[p] }), PHASE_LABELS[p]));
    if ((dev.uphases || []).length) clg.appendChild(el('span', null, el('span', { class: 'chip', style: 'border:1px solid #ccc;background:' + UPHASE_FILL[0] }), 'your phases'));
    clg.appendChild(el('span', null, '━ reserved'));
  }
  function selectDevice(i) {
    dev = DEVS[i];
    R = D.ranks[dev.rank];
    $('device').value = String(i);
    view = [dev.x0, dev.x1];
    if (!multi) showPeak(dev.peak.bytes, !dev.has_trace ? 'in the snapshot (no trace)' : dev.peak.k < 0 ? 'at the start of the trace' :
      'at ' + fmtX(dev.peak.x) + (dev.peak.phase ? ', ' + phaseLabel(dev.peak.phase) : '') + (dev.peak.uphase ? ', your phase "' + dev.peak.uphase + '"' : '') +
      (dev.peak.iteration ? ' (iteration ' + dev.peak.iteration + ' of ' + group3((dev.iterations || []).length) + ')' : ''));
    const trace = dev.has_trace;
    for (const id of ['v-timeline', 'v-categories', 'v-segtl']) $(id).hidden = !trace;
    $('v-notrace').hidden = trace;
    $('notrace-text').textContent = devName(dev) + ' has no trace: the file records only the segments and blocks at the moment it was written (PyTorch 1.13\'s memory_snapshot(), or _record_memory_history() was off), so there is no timeline to draw. What it holds: ' +
      fmtBoth(dev.peak.bytes) + ' allocated in ' + group3(dev.n_segments) + ' segments; the allocator state below is that moment.';
    const ms = $('moment');
    ms.textContent = '';
    ms.appendChild(el('option', { value: '' }, 'an event of your choice'));
    (dev.marks || []).forEach((m, j) => ms.appendChild(el('option', { value: String(j) }, stateLabel(m))));
    $('event').min = '-1'; $('event').max = String(Math.max(-1, dev.n_events - 1));
    hideTip();
    fl = null;
    drawBanner();
    if (trace) { legends(); drawTimeline(); drawCats(); drawSegtl(); } else { tl = null; cs = null; sg = null; drawn.timeline = drawn.cats = drawn.segtl = null; }
    drawPeakTable(); drawFlame(); drawFindings();
    showState(trace ? dev.peak.k : -1);
  }

  function showPeak(bytes, where) {
    const pb = $('peak-bytes');
    pb.textContent = fmtBoth(bytes);
    pb.dataset.bytes = String(bytes);
    $('peak-where').textContent = where;
  }
  function init() {
    $('gm-title').textContent = D.title;
    // several ranks: the header holds the job's peak and the rank that reaches it
    if (multi && D.job) {
      const pr = D.job.peak_rank;
      showPeak(D.job.peak, 'the job\'s, on rank ' + rankId(pr) + ' (' + D.ranks[pr].title + ') of ' + D.ranks.length + ' ranks numbered by ' + D.job.rank_from);
      $('peak-where').dataset.rank = String(rankId(pr));
    }
    drawRanks();
    drawAccount();
    if (!DEVS.length) {
      $('findings').appendChild(el('p', { class: 'empty' }, D.ranks.some((r) => r.digest) ? 'Every rank was read from its digest: the ranks above are all there is (the allocations stay in each rank\'s snapshot).' : 'The snapshot has no device: no segments and no trace.'));
      for (const id of ['v-timeline', 'v-categories', 'v-segtl', 'v-peak', 'v-flame', 'v-segments']) $(id).hidden = true;
      document.body.dataset.ready = '1';
      return;
    }
    const sel = $('device');
    // open on an out-of-memory event when there is one, else on the rank's busiest device
    let best = 0;
    DEVS.forEach((d, i) => {
      sel.appendChild(el('option', { value: String(i) }, devName(d) + ' (' + group3(d.n_events) + ' events' + ((d.ooms || []).length ? ', out of memory' : '') + ')'));
      if (d.n_events > DEVS[best].n_events) best = i;
    });
    const oom = firstOom();
    if (oom) best = DEVS.indexOf(oom);
    sel.addEventListener('change', () => selectDevice(Number(sel.value)));
    $('moment').addEventListener('change', () => { const m = dev.marks[Number($('moment').value)]; if (m) showState(m[0]); });
    $('event').addEventListener('change', () => { const k = Math.round(Number($('event').value)); if (Number.isFinite(k)) showState(Math.max(-1, Math.min(dev.n_events - 1, k))); });
    $('ev-prev').addEventListener('click', () => showState(Math.max(-1, (stateK === null ? 0 : stateK) - 1)));
    $('ev-next').addEventListener('click', () => showState(Math.min(dev.n_events - 1, (stateK === null ? -1 : stateK) + 1)));
    $('reset').addEventListener('click', () => setView(dev.x0, dev.x1));
    zoomable('timeline', hoverTimeline);
    zoomable('cats', hoverCats);
    zoomable('segtl', hoverSegtl);
    const sc = $('segments').querySelector('canvas');
    sc.addEventListener('mousemove', hoverSegments);
    sc.addEventListener('mouseleave', hideTip);
    const fc = $('flame').querySelector('canvas');
    fc.addEventListener('mousemove', (ev) => { const n = flameAt(ev); if (!n) { hideTip(); return; } showTip(ev, n.full, [fmtBoth(n.bytes) + ', ' + pct(n.bytes, fl.root.bytes) + ' of what is alive at the peak' + (n.lib ? ' (a library frame)' : '')], null); });
    fc.addEventListener('mouseleave', hideTip);
    fc.addEventListener('click', (ev) => { const n = flameAt(ev); if (!n) return; drawFlame(n === fl.focus && n.parent ? n.parent : n); });
    let rt = null;
    window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(() => { if (dev.has_trace) { drawTimeline(); drawCats(); drawSegtl(); } drawSegments(); drawFlame(fl && fl.focus); drawRanks(); }, 120); });
    selectDevice(best);
    document.body.dataset.ready = '1';
  }
  // for the browser tests: what each chart drew, and the state at any event
  window.gmReport = { drawn, stateAt: (k) => stateAt(k), select: (i) => selectDevice(i), setView: (a, b) => setView(a, b), devices: () => DEVS.map((d) => ({ rank: d.rank, device: d.device })), current: () => DEVS.indexOf(dev) };
  init();
})();
