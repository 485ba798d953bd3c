// SPDX-License-Identifier: MIT
// report.js - draws gpumem's HTML report from the data in <script id="gm-data">.
// Plain JavaScript and <canvas>; no framework, no request to anything outside this file.
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
  // for hover: bytes, and GiB whatever the magnitude
  const fmtHover = (b) => fmtBytes(b) + ' = ' + fmtExact(b) + ' = ' + (b / GIB).toFixed(b >= GIB ? 2 : 4) + ' GiB';
  const pct = (a, b) => (b > 0 ? (100 * a / b).toFixed(1) : '0.0') + '%';
  const hex = (a) => '0x' + Number(a).toString(16);
  let dev = null; // current device data
  function fmtX(x) {
    if (!dev || dev.x_unit !== 'us') return 'event ' + Math.round(x);
    const s = x / 1e6;
    if (Math.abs(dev.x1) >= 1e6) return s.toFixed(Math.abs(dev.x1) >= 100e6 ? 1 : 2) + ' s';
    if (Math.abs(dev.x1) >= 1e4) return (x / 1e3).toFixed(1) + ' ms';
    return Math.round(x) + ' µs';
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

  // ---- stacks ----
  function frameText(f) { return f[0] + ':' + f[2] + ' ' + f[1]; }
  function stackFrames(id) { return (D.stacks && D.stacks[String(id)]) || []; }
  function whereOf(id) {
    const fr = stackFrames(id);
    for (const i of fr) if (D.frames[i][3]) return D.frames[i];
    return fr.length ? D.frames[fr[0]] : null;
  }
  const short = (f) => f[0].split(/[\\/]/).pop() + ':' + f[2] + ' ' + f[1];
  // The first user frame, and the innermost frame when that is another one (two sites
  // called from the same user line stay apart: "train.py:60 train_step via adamw.py:120 _init_group").
  function whereText(id) {
    const f = whereOf(id), fr = stackFrames(id);
    if (!f) return '(no stack recorded)';
    const inner = D.frames[fr[0]];
    return short(f) + (inner && inner !== f ? ' via ' + short(inner) : '');
  }
  // The stack with the user's frames first, then the library frames (innermost first).
  function stackList(id, max) {
    const fr = stackFrames(id);
    const ul = el('ul', { class: 'frames' });
    if (!fr.length) { ul.appendChild(el('li', { class: 'sep' }, '(no stack recorded)')); return ul; }
    const user = fr.filter((i) => D.frames[i][3]), lib = fr.filter((i) => !D.frames[i][3]);
    let n = 0;
    for (const i of user) if (n++ < max) ul.appendChild(el('li', { class: 'user' }, frameText(D.frames[i])));
    if (lib.length) ul.appendChild(el('li', { class: 'sep' }, user.length ? '... called through ' + lib.length + ' library frame(s):' : 'library frames:'));
    for (const i of lib) if (n++ < max) ul.appendChild(el('li', { class: 'lib' }, frameText(D.frames[i])));
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
    return { g, w, h, pw: Math.max(10, w - M.l - M.r), ph: h - M.t - M.b };
  }
  function niceStep(range, n) {
    const raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  function byteTicks(max) {
    const unit = max >= GIB ? GIB : max >= MIB ? MIB : KIB;
    const step = niceStep(max / unit, 5) * unit, out = [];
    for (let v = 0, i = 0; v <= max + 1e-9 && i < 50; v += step, i++) out.push(v);
    return out;
  }
  function axes(c, view, ymax) {
    const g = c.g;
    g.strokeStyle = '#e3e7eb'; g.fillStyle = '#5f6b76'; g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1; g.textAlign = 'right'; g.textBaseline = 'middle';
    for (const v of byteTicks(ymax)) {
      const y = M.t + c.ph - v / ymax * c.ph;
      g.beginPath(); g.moveTo(M.l, y + 0.5); g.lineTo(M.l + c.pw, y + 0.5); g.stroke();
      g.fillText(fmtBytes(v).replace('.00 ', ' '), M.l - 6, y);
    }
    g.textAlign = 'center'; g.textBaseline = 'top';
    const span = view[1] - view[0], step = niceStep(span, Math.max(2, Math.floor(c.pw / 110)));
    for (let x = Math.ceil(view[0] / step) * step, i = 0; x <= view[1] && i < 100; x += step, i++) {
      const px = M.l + (x - view[0]) / span * c.pw;
      g.beginPath(); g.moveTo(px + 0.5, M.t + c.ph); g.lineTo(px + 0.5, M.t + c.ph + 4); g.stroke();
      g.textAlign = px > M.l + c.pw - 40 ? 'right' : 'center';
      g.fillText(fmtX(x), Math.min(px, M.l + c.pw), M.t + c.ph + 7);
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
    drawTimeline(); drawCats();
  }

  // Per pixel column: the bucket with the most allocated bytes and the state there.
  function columns(pw) {
    const span = view[1] - view[0], dx = span / pw, full = dev.x1 - dev.x0 || 1;
    let L = dev.lod[dev.lod.length - 1];
    for (const l of dev.lod) if (full / l.n <= dx) { L = l; break; }
    const n = L.n, cols = { amax: new Float64Array(pw), rmax: new Float64Array(pw), k: new Float64Array(pw) };
    for (let c = 0; c < pw; c++) {
      const xa = view[0] + c * dx, xb = xa + dx;
      let b0 = Math.floor((xa - dev.x0) / full * n), b1 = Math.ceil((xb - dev.x0) / full * n) - 1;
      b0 = Math.max(0, Math.min(n - 1, b0)); b1 = Math.max(b0, Math.min(n - 1, b1));
      let am = -1, rm = 0, k = -1;
      for (let b = b0; b <= b1; b++) {
        if (L.amax[b] > am) { am = L.amax[b]; k = L.kmax[b]; }
        if (L.rmax[b] > rm) rm = L.rmax[b];
      }
      cols.amax[c] = am; cols.rmax[c] = rm; cols.k[c] = k;
    }
    return cols;
  }

  // ---- view 1: active memory timeline ----
  // The bands to draw: the largest of the whole trace, plus, once zoomed in, the largest of
  // each window of events in view (level of detail), in allocation order.
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
  let tl = null; // layout of the last drawing, for hover
  function drawTimeline() {
    const canvas = $('timeline').querySelector('canvas');
    const c = setup(canvas, 330), g = c.g, pw = Math.floor(c.pw);
    const cols = columns(pw);
    let ymax = 1;
    for (let i = 0; i < pw; i++) ymax = Math.max(ymax, cols.amax[i], cols.rmax[i]);
    ymax *= 1.06;
    axes(c, view, ymax);
    const Y = (v) => M.t + c.ph - v / ymax * c.ph;
    const bands = bandsInView(), nb = bands.length;
    const off = new Float64Array(nb * pw).fill(-1), top = new Float64Array(pw);
    for (let x = 0; x < pw; x++) {
      const k = cols.k[x];
      let acc = 0;
      for (let i = 0; i < nb; i++) {
        const b = bands[i];
        if (b[0] <= k && k < b[1]) { off[i * pw + x] = acc; acc += b[4]; }
      }
      top[x] = acc;
    }
    let polys = 0;
    for (let i = 0; i < nb; i++) {
      const col = shade(catColor(bands[i][5]), i);
      g.fillStyle = col;
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
        for (let j = x - 1; j >= s; j--) {
          const y = Y(off[i * pw + j]);
          g.lineTo(M.l + j + 1, y); g.lineTo(M.l + j, y);
        }
        g.closePath(); g.fill(); polys++;
      }
    }
    // the rest, merged, on top of the bands
    g.fillStyle = 'rgba(200,200,200,0.75)';
    g.beginPath();
    for (let x = 0; x < pw; x++) { const y = Y(Math.max(top[x], cols.amax[x])); x ? g.lineTo(M.l + x, y) : g.moveTo(M.l, y); g.lineTo(M.l + x + 1, y); }
    for (let x = pw - 1; x >= 0; x--) { const y = Y(top[x]); g.lineTo(M.l + x + 1, y); g.lineTo(M.l + x, y); }
    g.closePath(); g.fill();
    // reserved
    g.strokeStyle = '#1d2228'; g.lineWidth = 1.2; g.setLineDash([]);
    g.beginPath();
    for (let x = 0; x < pw; x++) { const y = Y(cols.rmax[x]); x ? g.lineTo(M.l + x, y) : g.moveTo(M.l, y); g.lineTo(M.l + x + 1, y); }
    g.stroke();
    // the peak
    const p = dev.peak;
    if (p.x >= view[0] && p.x <= view[1]) {
      const px = M.l + (p.x - view[0]) / (view[1] - view[0]) * pw, py = Y(p.bytes);
      g.strokeStyle = '#d62728'; g.setLineDash([4, 3]);
      g.beginPath(); g.moveTo(px + 0.5, M.t); g.lineTo(px + 0.5, M.t + c.ph); g.stroke(); g.setLineDash([]);
      g.fillStyle = '#d62728'; g.beginPath(); g.arc(px, py, 3.5, 0, 7); g.fill();
      g.font = '600 12px system-ui, sans-serif'; g.textBaseline = 'bottom';
      g.textAlign = px > M.l + pw - 160 ? 'right' : 'left';
      g.fillText('peak ' + fmtBytes(p.bytes), px + (g.textAlign === 'right' ? -6 : 6), Math.max(M.t + 14, py - 4));
    }
    tl = { c, pw, cols, off, top, Y, ymax, bands };
    drawn.timeline = polys + 1;
    canvas.dataset.drawn = String(drawn.timeline);
    canvas.dataset.view = view[0] + ',' + view[1];
    canvas.dataset.bands = String(nb);
    const note = $('bands-note');
    if (note) note.textContent = group3(nb) + ' of ' + group3(dev.n_allocs) + ' allocations drawn one by one' + (nb > dev.bands.length ? ' (more in this zoomed view)' : '');
  }

  function hoverTimeline(ev) {
    if (!tl) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = Math.floor(ev.clientX - r.left - M.l), y = ev.clientY - r.top;
    if (x < 0 || x >= tl.pw || y < M.t || y > M.t + tl.c.ph) { hideTip(); return; }
    const v = (M.t + tl.c.ph - y) / tl.c.ph * tl.ymax, bands = tl.bands;
    const xv = view[0] + (x + 0.5) / tl.pw * (view[1] - view[0]);
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
    const a = tl.cols.amax[x], rs = tl.cols.rmax[x];
    if (v >= tl.top[x] && v < a) {
      showTip(ev, 'smaller allocations, merged', ['allocated in this band: ' + fmtBytes(a - tl.top[x]),
        group3(tl.bands.length) + ' largest of ' + group3(dev.n_allocs) + ' allocations are drawn one by one here (zoom in for more)',
        'at ' + fmtX(xv)]);
      return;
    }
    showTip(ev, fmtX(xv), ['allocated: ' + fmtBoth(a), 'reserved: ' + fmtBoth(rs)]);
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
      drawn.cats = 0; canvas.dataset.drawn = '0'; cs = null; return;
    }
    const span = view[1] - view[0], X = (x) => M.l + (x - view[0]) / span * pw;
    // the points in view, plus the one before (steps hold until the next point)
    let i0 = 0, i1 = S.x.length - 1;
    while (i0 < i1 && S.x[i0 + 1] <= view[0]) i0++;
    while (i1 > i0 && S.x[i1 - 1] >= view[1]) i1--;
    let ymax = 1;
    for (let i = i0; i <= i1; i++) {
      let t = 0; for (let k = 0; k < 7; k++) t += S.c[k][i];
      ymax = Math.max(ymax, t, S.r[i]);
    }
    ymax *= 1.06;
    const Y = (v) => M.t + c.ph - v / ymax * c.ph;
    // phases
    for (const r of dev.runs || []) {
      if (r[1] < view[0] || r[0] > view[1] || !PHASE_FILL[r[2]]) continue;
      g.fillStyle = PHASE_FILL[r[2]];
      const a = Math.max(M.l, X(r[0])), b = Math.min(M.l + pw, X(r[1]));
      g.fillRect(a, M.t, Math.max(1, b - a), c.ph);
    }
    axes(c, view, ymax);
    const xs = (i) => Math.max(M.l, Math.min(M.l + pw, X(S.x[i])));
    const xe = (i) => (i < i1 ? xs(i + 1) : M.l + pw);
    // The steps to draw: each point's, or, with more points in view than pixel columns, one
    // a column: the point with the most allocated bytes among those that hold in it (as the
    // timeline does), so that a fill never has more vertices than the chart has pixels
    // (thousands of sub-pixel steps made the browser take most of a second to paint it).
    let pts = [], x0s = [], x1s = [], rmax = [];
    if (i1 - i0 + 1 > pw) {
      const ncol = Math.ceil(pw), rep = new Int32Array(ncol).fill(-1), best = new Float64Array(ncol).fill(-1), rm = new Float64Array(ncol);
      for (let i = i0; i <= i1; i++) {
        let t = 0; for (let k = 0; k < 7; k++) t += S.c[k][i];
        const a = Math.max(0, Math.floor(xs(i) - M.l)), b = Math.min(ncol, Math.max(a + 1, Math.ceil(xe(i) - M.l)));
        for (let col = a; col < b; col++) {
          if (t > best[col]) { best[col] = t; rep[col] = i; }
          if (S.r[i] > rm[col]) rm[col] = S.r[i];
        }
      }
      for (let col = 0; col < ncol; col++) {
        if (rep[col] < 0) continue;
        pts.push(rep[col]); x0s.push(M.l + col); x1s.push(Math.min(M.l + pw, M.l + col + 1)); rmax.push(rm[col]);
      }
    } else {
      for (let i = i0; i <= i1; i++) { pts.push(i); x0s.push(xs(i)); x1s.push(xe(i)); rmax.push(S.r[i]); }
    }
    const np = pts.length, base = new Float64Array(np);
    let polys = 0;
    for (let k = 0; k < 7; k++) {
      let any = false;
      for (let j = 0; j < np; j++) if (S.c[k][pts[j]]) { any = true; break; }
      if (!any) continue;
      g.fillStyle = CAT_COLORS[k];
      g.beginPath();
      for (let j = 0; j < np; j++) {
        const y = Y(base[j] + S.c[k][pts[j]]);
        if (j === 0) g.moveTo(x0s[j], y); else g.lineTo(x0s[j], y);
        g.lineTo(x1s[j], y);
      }
      for (let j = np - 1; j >= 0; j--) { const y = Y(base[j]); g.lineTo(x1s[j], y); g.lineTo(x0s[j], y); }
      g.closePath(); g.fill(); polys++;
      for (let j = 0; j < np; j++) base[j] += S.c[k][pts[j]];
    }
    g.strokeStyle = '#1d2228'; g.lineWidth = 1;
    g.beginPath();
    for (let j = 0; j < np; j++) {
      const y = Y(rmax[j]);
      if (j === 0) g.moveTo(x0s[j], y); else g.lineTo(x0s[j], y);
      g.lineTo(x1s[j], y);
    }
    g.stroke();
    cs = { c, X, Y, i0, i1, ymax };
    drawn.cats = polys;
    canvas.dataset.drawn = String(polys);
  }

  function hoverCats(ev) {
    const S = dev.series;
    if (!cs || !S) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const px = ev.clientX - r.left - M.l;
    if (px < 0 || px > cs.c.pw) { hideTip(); return; }
    const x = view[0] + px / cs.c.pw * (view[1] - view[0]);
    let lo = 0, hi = S.x.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (S.x[mid] <= x) lo = mid; else hi = mid - 1; }
    let t = 0; const lines = [];
    for (let k = 0; k < 7; k++) t += S.c[k][lo];
    for (let k = 6; k >= 0; k--) if (S.c[k][lo]) lines.push(CAT_LABELS[k] + ': ' + fmtBytes(S.c[k][lo]) + ' (' + pct(S.c[k][lo], t) + ')');
    let ph = 0;
    for (const rr of dev.runs || []) if (rr[0] <= x && x < rr[1]) ph = rr[2];
    lines.push('allocated: ' + fmtBoth(t));
    lines.push('reserved: ' + fmtBytes(S.r[lo]));
    lines.push('phase: ' + PHASE_LABELS[ph] + ', event ' + S.k[lo]);
    showTip(ev, fmtX(x), lines);
  }

  // ---- drag to zoom (both time views) ----
  function zoomable(id, hover) {
    const box = $(id), canvas = box.querySelector('canvas'), sel = box.querySelector('.sel');
    let start = null;
    const px = (ev) => ev.clientX - canvas.getBoundingClientRect().left - M.l;
    canvas.addEventListener('mousedown', (ev) => { start = px(ev); ev.preventDefault(); });
    window.addEventListener('mousemove', (ev) => {
      if (start === null) return;
      const a = Math.min(start, px(ev)), b = Math.max(start, px(ev));
      sel.style.display = 'block'; sel.style.left = (M.l + Math.max(0, a)) + 'px';
      sel.style.width = Math.max(0, b - Math.max(0, a)) + 'px';
    });
    window.addEventListener('mouseup', (ev) => {
      if (start === null) return;
      const a = start, b = px(ev), pw = canvas.clientWidth - M.l - M.r;
      start = null; sel.style.display = 'none';
      if (Math.abs(b - a) < 4) { pickMomentAt(view[0] + a / pw * (view[1] - view[0])); return; }
      const span = view[1] - view[0];
      setView(view[0] + Math.max(0, Math.min(a, b)) / pw * span, view[0] + Math.min(pw, Math.max(a, b)) / pw * span);
    });
    canvas.addEventListener('dblclick', () => setView(dev.x0, dev.x1));
    canvas.addEventListener('mousemove', (ev) => { if (start === null) hover(ev); });
    canvas.addEventListener('mouseleave', hideTip);
  }

  // ---- view 3: at the peak ----
  function drawPeakTable() {
    const p = dev.peak, box = $('peak-table');
    box.textContent = '';
    $('peak-hint').textContent = 'What is alive at the peak (' + fmtBoth(p.bytes) + ' at ' +
      (p.k < 0 ? 'the start of the trace' : fmtX(p.x) + ', event ' + p.k) +
      (p.phase ? ', during ' + PHASE_LABELS[D.phases.indexOf(p.phase)] : '') +
      (p.iteration >= 0 ? ' of iteration ' + (p.iteration + 1) : '') +
      '), grouped by allocation site and category. Sizes are the bytes the trace records (requested), below what max_memory_allocated() counts after rounding. Click a row for its stack.';
    if (!dev.at_peak.length) { box.appendChild(el('p', { class: 'empty' }, 'Nothing is alive at the peak.')); drawn.peak = 0; return; }
    const tb = el('tbody');
    const maxb = dev.at_peak[0][0];
    for (const r of dev.at_peak) {
      const row = el('tr', { class: 'row' },
        el('td', { class: 'num' }, el('span', { class: 'bar', style: 'width:' + Math.max(1, Math.round(60 * r[0] / maxb)) + 'px' }), pct(r[0], p.bytes)),
        el('td', { class: 'num' }, fmtBytes(r[0])),
        el('td', { class: 'num' }, group3(r[0])),
        el('td', { class: 'num' }, group3(r[1])),
        el('td', null, el('span', { class: 'chip', style: 'background:' + catColor(r[2]) }), CAT_LABELS[r[2]]),
        el('td', { class: 'where' }, whereText(r[3])));
      let open = null;
      row.addEventListener('click', () => {
        if (open) { open.remove(); open = null; return; }
        open = el('tr', { class: 'stack' }, el('td', { colspan: '6' }, stackList(r[3], 60)));
        row.after(open);
      });
      row.addEventListener('mousemove', (ev) => showTip(ev, fmtHover(r[0]), [group3(r[1]) + ' allocation(s), ' + pct(r[0], p.bytes) + ' of the peak', 'category: ' + CAT_LABELS[r[2]]], r[3]));
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

  // ---- view 4: segments at a chosen moment ----
  let seg = null;
  function pickMomentAt(x) {
    if (!dev.moments.length) return;
    let best = 0;
    dev.moments.forEach((m, i) => { if (Math.abs(m.x - x) < Math.abs(dev.moments[best].x - x)) best = i; });
    $('moment').value = String(best);
    drawSegments();
  }
  function drawSegments() {
    const mi = Number($('moment').value || 0), m = dev.moments[mi];
    const canvas = $('segments').querySelector('canvas');
    const sum = $('seg-summary');
    sum.textContent = '';
    if (!m || !m.segments.length) {
      const c = setup(canvas, 40);
      c.g.fillStyle = '#5f6b76'; c.g.font = '13px system-ui, sans-serif';
      c.g.fillText('No segments at this moment.', 10, 24);
      drawn.segments = 0; canvas.dataset.drawn = '0'; seg = null; return;
    }
    // free gaps and the largest one
    let largest = 0, nblocks = 0;
    for (const s of m.segments) {
      let pos = 0;
      for (const b of s[4]) { largest = Math.max(largest, b[0] - pos); pos = b[0] + b[1]; nblocks++; }
      if (!s[5]) largest = Math.max(largest, s[1] - pos);
    }
    const waste = m.occupied - m.requested, free = m.reserved - m.occupied;
    for (const [k, v, col] of [['reserved', m.reserved, '#1d2228'], ['allocated (requested)', m.requested, '#1f77b4'],
      ['rounding and split waste', waste, '#d62728'], ['free in segments', free, '#dfe3e8'], ['largest free range', largest, null]]) {
      sum.appendChild(el('span', null, col ? el('span', { class: 'chip', style: 'background:' + col }) : null, k + ': ' + fmtBytes(v)));
    }
    sum.appendChild(el('span', null, group3(m.segments.length) + ' segments, ' + group3(nblocks) + ' blocks shown'));
    const rows = Math.max(4, Math.min(28, Math.ceil(m.segments.length / 3) + 4)), rh = 16;
    const c = setup(canvas, rows * rh + 6), g = c.g, W = c.w - 8;
    const total = m.reserved, perPx = total / (rows * W);
    const pos = (byte) => { const p = byte / perPx; return [4 + (p % W), 3 + Math.floor(p / W) * rh]; };
    const span = (a, b, color) => { // draw bytes [a, b) wrapping over rows
      let p = Math.max(0, a / perPx); const e = Math.min(b, total) / perPx;
      g.fillStyle = color;
      for (let guard = 0; p < e && guard <= rows; guard++) {
        const row = Math.floor(p / W), x = p - row * W, w = Math.min(e - p, W - x);
        g.fillRect(4 + x, 3 + row * rh, Math.max(w, 0.6), rh - 3);
        p = (row + 1) * W; // the next row (w reaches the row's end unless the span ends)
        if (w < W - x) break;
      }
    };
    span(0, total, '#e6e9ed');
    let base = 0;
    const starts = [];
    for (const s of m.segments) {
      starts.push(base);
      for (const b of s[4]) {
        if (b[0] >= s[1]) continue;
        span(base + b[0], base + b[0] + Math.min(b[2], b[1]), b[5] ? '#8c564b' : catColor(b[3]));
        if (b[1] > b[2]) span(base + b[0] + b[2], base + b[0] + b[1], '#d62728');
        if (b[1] / perPx >= 4) { const [x, y] = pos(base + b[0]); g.fillStyle = 'rgba(255,255,255,0.8)'; g.fillRect(x, y, 1, rh - 3); }
      }
      base += s[1];
    }
    g.fillStyle = '#1d2228';
    for (const st of starts) { const [x, y] = pos(st); g.fillRect(x, y - 1, 1.2, rh - 1); }
    seg = { m, W, rh, perPx, starts };
    drawn.segments = m.segments.length;
    canvas.dataset.drawn = String(drawn.segments);
  }
  function hoverSegments(ev) {
    if (!seg) return;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = ev.clientX - r.left - 4, y = ev.clientY - r.top - 3;
    if (x < 0 || x >= seg.W || y < 0) { hideTip(); return; }
    const byte = (Math.floor(y / seg.rh) * seg.W + x) * seg.perPx;
    let i = 0;
    while (i + 1 < seg.starts.length && seg.starts[i + 1] <= byte) i++;
    const s = seg.m.segments[i];
    if (!s || byte >= seg.starts[i] + s[1]) { hideTip(); return; }
    const o = byte - seg.starts[i];
    const head = 'segment ' + hex(s[0]) + ': ' + fmtBytes(s[1]) + ', ' + (s[3] & 1 ? 'small' : 'large') + ' pool' + (s[3] & 2 ? ', expandable' : '') + ', stream ' + s[2];
    for (const b of s[4]) {
      if (o >= b[0] && o < b[0] + b[1]) {
        showTip(ev, fmtHover(b[2]), [
          'category: ' + CAT_LABELS[b[3]] + (b[5] ? ', freed but pending on another stream' : ''),
          'block: ' + fmtBytes(b[1]) + ' at ' + hex(s[0] + b[0]) + (b[1] > b[2] ? ', waste ' + fmtBytes(b[1] - b[2]) : ''),
          head], b[4]);
        return;
      }
    }
    const merged = s[5] ? ' (' + group3(s[6]) + ' small blocks of ' + fmtBytes(s[5]) + ' not drawn)' : '';
    showTip(ev, 'free', [head + merged]);
  }

  // ---- view 5: findings ----
  function finding(cls, title, ...kids) {
    return el('div', { class: 'finding ' + cls }, el('h3', null, title), ...kids);
  }
  const LEAK_ROWS = 20;
  function drawFindings() {
    const box = $('findings');
    box.textContent = '';
    let n = 0;
    const p = dev.peak;
    // out-of-memory events and leaks on the other devices
    for (const o of D.devices) {
      if (o === dev) continue;
      const nooms = (o.ooms || []).length, nleaks = (o.leaks || []).length;
      if (!nooms && !nleaks) continue;
      const idx = D.devices.indexOf(o);
      box.appendChild(finding('warn', 'cuda:' + o.device + ' has ' + (nooms ? nooms + ' out-of-memory event(s)' : '') +
        (nooms && nleaks ? ' and ' : '') + (nleaks ? nleaks + ' leak(s)' : ''),
        el('p', null, el('button', { onclick: () => { $('device').value = String(idx); selectDevice(idx); } }, 'show cuda:' + o.device))));
      n++;
    }
    // what the peak is made of
    if (dev.at_peak_cat) {
      const parts = [];
      dev.at_peak_cat.forEach((b, k) => { if (b) parts.push([b, k]); });
      parts.sort((a, b) => b[0] - a[0]);
      const ul = el('ul');
      for (const [b, k] of parts) ul.appendChild(el('li', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k] + ': ' + fmtBytes(b) + ' (' + pct(b, p.bytes) + ')'));
      box.appendChild(finding('', 'The peak: ' + fmtBoth(p.bytes) + (p.phase ? ' during ' + PHASE_LABELS[D.phases.indexOf(p.phase)] : ''),
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
      // the largest sites first; the rest of a long list only on request
      ls.slice(0, LEAK_ROWS).forEach(addRow);
      const rest = ls.length > LEAK_ROWS ? el('button', {
        onclick: () => { ls.slice(LEAK_ROWS).forEach(addRow); rest.remove(); },
      }, 'show all ' + group3(ls.length) + ' sites') : null;
      box.appendChild(finding('warn', 'Leak: ' + fmtBytes(l.per_iteration) + ' more every iteration from ' + ls.length + ' allocation site(s) (' + l.kind.replace(/_/g, ' ') + ', iterations ' + l.first_iteration + ' to ' + l.last_iteration + ')',
        el('p', null, fmtBytes(l.total) + ' is still alive at the end. ' + l.advice),
        el('p', null, 'Where the largest part is allocated:'), stackList(l.stack, 14),
        el('table', null, el('thead', null, el('tr', null, el('th', { class: 'num' }, 'per iteration'), el('th', { class: 'num' }, 'kept at the end'),
          el('th', { class: 'num' }, 'allocations'), el('th', { class: 'num' }, 'iterations'), el('th', null, 'category'), el('th', null, 'where (first user frame)'))), tb),
        rest ? el('p', null, rest) : null));
      n++;
    }
    if (dev.leak_verdict === 'none' || dev.leak_verdict === 'too_few_iterations')
      box.appendChild(finding(dev.leak_verdict === 'none' ? 'ok' : '', dev.leak_verdict_text.charAt(0).toUpperCase() + dev.leak_verdict_text.slice(1) + '.'));
    for (const o of dev.ooms || []) {
      box.appendChild(finding('warn', 'Out of memory at ' + fmtX(o.x) + ': ' + o.verdict,
        el('p', null, 'Requested ' + fmtBoth(o.requested) + '; CUDA reported ' + fmtBytes(o.device_free) + ' free; the allocator had reserved ' +
          fmtBytes(o.reserved) + ' with ' + fmtBytes(o.reserved_unallocated) + ' not allocated; largest free range ' + fmtBytes(o.largest_free) + '.'),
        el('p', null, o.advice), stackList(o.stack, 30)));
      n++;
    }
    if (dev.frag) {
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
    // metadata and settings
    const md = D.meta, dl = el('dl', { class: 'meta' });
    const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
    add('file', D.title + ' (' + fmtBytes(md.file_size) + ')');
    add('format', md.generation + ' (PyTorch ' + md.torch + '), pickle protocol ' + md.protocol + (md.is_list ? ', segments only' : ''));
    add('devices', D.devices.map((d) => d.device).join(', '));
    add('contents', group3(md.segments) + ' segments, ' + group3(md.blocks) + ' blocks, ' + group3(md.events) + ' trace events, ' + group3(md.frames) + ' frames, ' + group3(md.stacks) + ' stacks');
    if (md.has_time) add('time span', ((md.time_last_us - md.time_first_us) / 1e6).toFixed(3) + ' s from ' + new Date(md.time_first_us / 1000).toISOString());
    add('annotations', group3(md.annotations));
    if (md.trace_overflowed) add('warning', 'the trace ring buffer overflowed: the oldest events are missing');
    if (md.unknown_actions) add('unknown actions', group3(md.unknown_actions));
    add('this device', 'device ' + dev.device + ': ' + group3(dev.n_events) + ' events, ' + group3(dev.n_segments) + ' segments, reserved at the peak ' + fmtBytes(dev.peak.reserved) + ', highest reserved ' + fmtBytes(dev.peak.max_reserved));
    add('report', 'gpumem ' + D.gpumem_version + (md.has_analysis ? '' : ' (no analysis: categories unavailable)'));
    const sdl = el('dl', { class: 'meta' });
    for (const [k, v] of D.settings) { sdl.appendChild(el('dt', null, k)); sdl.appendChild(el('dd', null, v)); }
    box.appendChild(el('div', { class: 'grid2' }, finding('', 'Snapshot', dl),
      finding('', 'Allocator settings', D.settings.length ? sdl : el('p', { class: 'empty' }, 'not recorded (PyTorch before 2.3)'))));
    drawn.findings = n + 2;
    box.dataset.drawn = String(drawn.findings);
  }
  // The iterations: a summary and the outliers (the first iteration, and those whose peak or
  // change of memory differs most from the typical one); every iteration's row only when the
  // reader asks for it, built then (thousands of rows would make the page slow to open).
  const ITER_ALL = 20, ITER_OUTLIERS = 10;
  function median(v) {
    const s = v.slice().sort((a, b) => a - b);
    return s.length ? s[s.length >> 1] : 0;
  }
  function iterRows(its, idx) {
    const tb = el('tbody');
    for (const i of idx) {
      const it = its[i], prev = i ? its[i - 1].end : it.start;
      tb.appendChild(el('tr', null, el('td', { class: 'num' }, String(i + 1)), el('td', { class: 'num' }, fmtX(it.x0)),
        el('td', { class: 'num' }, fmtBytes(it.peak)), el('td', null, PHASE_LABELS[D.phases.indexOf(it.peak_phase)] || it.peak_phase),
        el('td', { class: 'num' }, fmtBytes(it.end)), el('td', { class: 'num' }, (it.end >= prev ? '+' : '-') + fmtBytes(Math.abs(it.end - prev)))));
    }
    return el('table', null, el('thead', null, el('tr', null,
      el('th', { class: 'num' }, '#'), el('th', { class: 'num' }, 'start'), el('th', { class: 'num' }, 'peak'), el('th', null, 'peak phase'),
      el('th', { class: 'num' }, 'alive at end'), el('th', { class: 'num' }, 'change'))), tb);
  }
  function iterationsFinding(its) {
    const all = its.map((_, i) => i);
    const title = its.length + ' training iteration(s)';
    if (its.length <= ITER_ALL) return finding('iters', title, iterRows(its, all));
    const peaks = its.map((it) => it.peak);
    const change = its.map((it, i) => it.end - (i ? its[i - 1].end : it.start));
    const mp = median(peaks), mc = median(change);
    let lo = peaks[0], hi = peaks[0];
    for (const b of peaks) { lo = Math.min(lo, b); hi = Math.max(hi, b); }
    // how far from typical: the larger of the peak's and the change's distance from their
    // medians, in bytes; ties broken by the iteration's number, so the choice is stable
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
    for (const [k, v] of D.settings) if (k === key) return v === 'True';
    return false;
  }

  // ---- legends, device selection ----
  function legends() {
    const tlg = $('timeline-legend'), clg = $('cats-legend');
    tlg.textContent = ''; clg.textContent = '';
    const used = new Set(dev.bands.map((b) => b[5]));
    for (let k = 0; k < 7; k++) if (used.has(k)) tlg.appendChild(el('span', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k]));
    tlg.appendChild(el('span', null, el('span', { class: 'chip', style: 'background:rgba(200,200,200,0.75)' }), 'smaller allocations, merged'));
    tlg.appendChild(el('span', null, '━ reserved'));
    tlg.appendChild(el('span', { style: 'color:#d62728' }, '┆ peak'));
    tlg.appendChild(el('span', { id: 'bands-note' }, group3(dev.bands.length) + ' of ' + group3(dev.n_allocs) + ' allocations drawn one by one'));
    for (let k = 0; k < 7; k++) clg.appendChild(el('span', null, el('span', { class: 'chip', style: 'background:' + CAT_COLORS[k] }), CAT_LABELS[k]));
    for (let p = 1; p < 4; p++) clg.appendChild(el('span', null, el('span', { class: 'chip', style: 'border:1px solid #ccc;background:' + PHASE_FILL[p] }), PHASE_LABELS[p]));
    clg.appendChild(el('span', null, '━ reserved'));
  }
  function selectDevice(i) {
    dev = D.devices[i];
    view = [dev.x0, dev.x1];
    const pb = $('peak-bytes');
    pb.textContent = fmtBoth(dev.peak.bytes);
    pb.dataset.bytes = String(dev.peak.bytes);
    $('peak-where').textContent = dev.peak.k < 0 ? 'at the start of the trace' : 'at ' + fmtX(dev.peak.x) + (dev.peak.phase ? ', ' + PHASE_LABELS[D.phases.indexOf(dev.peak.phase)] : '');
    const ms = $('moment');
    ms.textContent = '';
    dev.moments.forEach((m, j) => ms.appendChild(el('option', { value: String(j) }, (m.k < 0 ? 'start' : fmtX(m.x)) + ', ' + m.label)));
    let pk = dev.moments.findIndex((m) => m.k === dev.peak.k);
    ms.value = String(pk >= 0 ? pk : 0);
    legends(); drawTimeline(); drawCats(); drawPeakTable(); drawSegments(); drawFindings();
  }

  function init() {
    $('gm-title').textContent = D.title;
    if (!D.devices.length) {
      $('findings').appendChild(el('p', { class: 'empty' }, 'The snapshot has no device: no segments and no trace.'));
      document.body.dataset.ready = '1';
      return;
    }
    const sel = $('device');
    let best = 0;
    D.devices.forEach((d, i) => {
      sel.appendChild(el('option', { value: String(i) }, 'cuda:' + d.device + ' (' + group3(d.n_events) + ' events)'));
      if (d.n_events > D.devices[best].n_events) best = i;
    });
    sel.value = String(best);
    sel.addEventListener('change', () => selectDevice(Number(sel.value)));
    $('moment').addEventListener('change', drawSegments);
    $('reset').addEventListener('click', () => setView(dev.x0, dev.x1));
    zoomable('timeline', hoverTimeline);
    zoomable('cats', hoverCats);
    const sc = $('segments').querySelector('canvas');
    sc.addEventListener('mousemove', hoverSegments);
    sc.addEventListener('mouseleave', hideTip);
    let rt = null;
    window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(() => { drawTimeline(); drawCats(); drawSegments(); }, 120); });
    selectDevice(best);
    document.body.dataset.ready = '1';
  }
  init();
})();
