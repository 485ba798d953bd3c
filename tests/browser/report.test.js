// SPDX-License-Identifier: MIT
// report.test.js - gpumem's HTML report in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core; no browser download).
//
//   node report.test.js --gpumem BIN [--layout BIN] --snapshot FILE [--snapshot FILE...]
//                       [--ranks A,B] [--many-ranks DIR] [--phases FILE] [--screenshot DIR] [--timing]
//                       [--also-no-analysis] [--quick FILE...]
//
// For each --snapshot (reports written with --points 2000, the resolution of `snapshot
// categories --json --series`, so that both hold the same series) it checks:
//   - the page loads with no console error and no request to anything but itself; every view
//     draws; many iterations are summarised; hovering the timeline shows a stack; every
//     device and moment can be selected;
//   - pictures that cannot contradict the numbers: at window widths 390, 1400 and 2560 px,
//     and after zooming (wheel) onto the peak at 1400 px, the most drawn in the timeline, the
//     categories chart, the icicle and the segment timeline equal the peak (and the highest
//     reserved) of `snapshot peak --json`, for every device with a trace, and the peak's column
//     is dark up to its height; the y labels share one unit and two decimals, the x labels
//     all differ (also zoomed into milliseconds); at 390 px nothing is wider than the window;
//   - the categories chart agrees with `snapshot categories --json --series` at every step it
//     draws of a zoomed window (the state drawn is one of the series' points, with its bytes,
//     and the one with the most bytes among those that hold in its column);
//   - the table at the peak has the groups of `snapshot peak --json` (live_groups);
//   - with --layout: the allocator state the page rebuilds at random events (and the start,
//     the peak and the end) equals, block for block, the library's layout at that event
//     (the gm_layout_at test helper), wherever the page holds that event's state;
//   - a file with an OOM opens on that device, with a banner naming the verdict and the
//     request, and the timeline marks it; a file without a trace draws no timeline.
// --ranks A,B: the page of two rank files shows both ranks and their imbalance, with the
// highest and lowest peaks of `snapshot peak --json`.  --phases FILE: the user phases of FILE
// are drawn and the peak's is named as `snapshot peak --json` names it.  --account FILE: a
// report of the first --snapshot with that account (gpumem account's timeline) shows each
// process's whole device: one bar per equation of `gpumem account --json`, its terms adding
// up to the device used it names, the snapshot's highest reserved marked.  --quick FILE: only the basic checks (odd files).
// --bands FILE: the timeline's bands and merged stack by what they mean (gpumem/bands.h): the
// parameters alive at the end (`snapshot categories --json --series`) are drawn in the
// parameter colour in every column from where they are all in place (the whole width when
// they were alive before the trace began), their pixels too where they are tall enough to
// see; the merged rest is a stack of category colours (no grey; hovering it names its
// category), each column's stack of bands and merged categories adds up to the most
// allocated there, also zoomed, and the highest column to `snapshot peak --json`; bands are drawn in every column and the
// allocations neither alive at the start nor at the end are chosen in every tenth of the
// trace that has any (by the middle of their lives; the list from a report with every
// allocation a band, or the 100,000 the option allows), not only in its first iterations;
// the peak's iteration, the moments at iterations' peaks and the iterations table are
// numbered as the CLI numbers them ("iteration N of M", from 1).
// --screenshot DIR writes PNGs of the first report at each width; --timing prints the load
// time and size.  Exit 0 ok, 1 failure, 77 skipped (no Chromium or no playwright-core: run
// scripts/install-deps.sh).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const CHROMIUM = process.env.GM_CHROMIUM || '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const WIDTHS = [390, 1400, 2560];

function parseArgs(argv) {
  const a = { bands: [], snapshots: [], quick: [], gpumem: process.env.GPUMEM, layout: null, screenshot: null, timing: false, noAnalysis: false, ranks: null, manyRanks: [], phases: [], account: null };
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--gpumem') a.gpumem = argv[++i];
    else if (argv[i] === '--layout') a.layout = argv[++i];
    else if (argv[i] === '--snapshot') a.snapshots.push(argv[++i]);
    else if (argv[i] === '--quick') a.quick.push(argv[++i]);
    else if (argv[i] === '--bands') a.bands.push(argv[++i]);
    else if (argv[i] === '--ranks') a.ranks = argv[++i].split(',');
    else if (argv[i] === '--many-ranks') a.manyRanks.push(argv[++i]);
    else if (argv[i] === '--phases') a.phases.push(argv[++i]);
    else if (argv[i] === '--account') a.account = argv[++i];
    else if (argv[i] === '--screenshot') a.screenshot = argv[++i];
    else if (argv[i] === '--timing') a.timing = true;
    else if (argv[i] === '--also-no-analysis') a.noAnalysis = true;
    else throw new Error('unknown argument ' + argv[i]);
  }
  if (!a.gpumem || !(a.snapshots.length || a.quick.length || a.bands.length)) throw new Error('usage: report.test.js --gpumem BIN --snapshot FILE...');
  return a;
}

let failures = 0;
function check(cond, what) {
  if (cond) { console.log('  ok   ' + what); return; }
  console.log('  FAIL ' + what);
  failures++;
}
const json = (bin, args) => JSON.parse(execFileSync(bin, args, { maxBuffer: 1 << 30 }).toString());

// A small seeded generator, so that the random events are the same on every run.
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}

async function open(chromium, tmp, html, width) {
  const profile = fs.mkdtempSync(path.join(tmp, 'profile-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: width || 1400, height: 900 },
  });
  const errors = [], requests = [];
  const url = 'file://' + html;
  ctx.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  const page = ctx.pages()[0] || await ctx.newPage();
  // (the test's own getImageData readbacks make Chromium suggest willReadFrequently: not the page's)
  page.on('console', (m) => { if ((m.type() === 'error' || m.type() === 'warning') && !/willReadFrequently/.test(m.text())) errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 120000 });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  return { ctx, page, errors, requests, loadMs: Date.now() - t0 };
}

async function setWidth(page, w) {
  await page.setViewportSize({ width: w, height: 900 });
  await page.evaluate(() => window.dispatchEvent(new Event('resize')));
  await page.waitForTimeout(350);
}

// The pixels of the timeline's highest column: painted from the x axis up to the peak's
// height (the pixel just below where the peak's bytes fall on the y axis is painted, none of
// the column below it is empty), and dark at its top so that the eye sees it.
const peakPixels = (page) => page.evaluate(() => {
  const t = window.gmReport.drawn.timeline;
  if (!t) return null;
  const c = document.querySelector('#timeline canvas'), dpr = window.devicePixelRatio || 1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let bc = 0;
  t.amax.forEach((v, i) => { if (v > t.amax[bc]) bc = i; });
  const x = Math.floor((t.left + bc + 0.5) * dpr), want = t.top + t.ph - t.amax[bc] / t.ymax * t.ph;
  const at = (y) => (Math.floor(y * dpr) * c.width + x) * 4;
  const painted = (y) => d[at(y) + 3] >= 128;
  let lowest = -1; // the lowest empty pixel between the peak's height and the axis
  for (let y = Math.ceil(want + 1); y < t.top + t.ph - 1; y++) if (!painted(y)) lowest = y;
  // and the eye sees it: the top of the column is dark, not the light grey of the merged
  // area a one-pixel spike vanishes in beside the peak's marker line
  const o = at(want + 1), dark = (d[o] + d[o + 1] + d[o + 2]) / 3 < 150;
  const why = !painted(want + 1) ? 'empty at y ' + Math.ceil(want + 1) : lowest >= 0 ? 'empty at y ' + lowest : dark ? '' : 'light at its top';
  return { want, why, ok: !why };
});

const drawnOf = (page) => page.evaluate(() => {
  const d = window.gmReport.drawn, i = window.gmReport.current(), dv = window.gmReport.devices()[i];
  return { device: dv.device, rank: dv.rank, tl: d.timeline, cats: d.cats && { max: d.cats.max, n: d.cats.steps.length }, segtl: d.segtl, flame: d.flame, segments: d.segments,
    sw: document.documentElement.scrollWidth, iw: window.innerWidth };
});

// The pictures against the numbers, for the device shown.
function checkPictures(dr, want, label) {
  if (!want) return;
  if (dr.tl) {
    check(dr.tl.max === want.peak_bytes, label + ': timeline draws the peak, ' + dr.tl.max + ' = ' + want.peak_bytes);
    const units = new Set(dr.tl.ylabels.map((l) => l.split(' ')[1]));
    check(units.size === 1 && dr.tl.ylabels.every((l) => /^\d+\.\d\d [KMG]iB$/.test(l)), label + ': y labels in one unit, two decimals (' + dr.tl.ylabels.join(', ') + ')');
    check(dr.tl.xlabels.length >= 2 && new Set(dr.tl.xlabels).size === dr.tl.xlabels.length, label + ': x labels all differ (' + dr.tl.xlabels.join(', ') + ')');
  }
  if (dr.cats) check(dr.cats.max === want.peak_bytes, label + ': categories chart draws the peak, ' + dr.cats.max);
  if (dr.segtl) check(dr.segtl.max === want.peak_reserved_bytes, label + ': segment timeline draws the highest reserved, ' + dr.segtl.max + ' = ' + want.peak_reserved_bytes);
  if (dr.flame) check(dr.flame.root === want.peak_bytes, label + ': the icicle holds what is alive at the peak, ' + dr.flame.root);
}

// Zoom with the mouse wheel onto the peak's column, a few notches; the pointer's position is
// a whole pixel, so when the peak drifts out of the view a drag pans it back to the middle.
async function zoomOnPeak(page) {
  await page.$eval('#timeline', (e) => e.scrollIntoView());
  const box = await page.$eval('#timeline canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
  const pw = Math.floor(box.w - 74 - 14);
  const where = () => page.evaluate(() => {
    const D = JSON.parse(document.getElementById('gm-data').textContent);
    const cur = window.gmReport.devices()[window.gmReport.current()];
    const d = D.ranks[cur.rank].devices.find((x) => x.device === cur.device);
    const v = window.gmReport.drawn.timeline.view;
    return (d.peak.x - v[0]) / (v[1] - v[0]);
  });
  for (let i = 0; i < 6; i++) {
    let f = await where();
    if (f <= 0.02 || f >= 0.98) {
      const mid = box.x + 74 + pw / 2;
      await page.mouse.move(mid, box.y + 120);
      await page.mouse.down();
      await page.mouse.move(mid - (f - 0.5) * pw, box.y + 120, { steps: 3 });
      await page.mouse.up();
      f = await where();
    }
    await page.mouse.move(box.x + 74 + f * pw, box.y + 120);
    await page.mouse.wheel(0, -400);
    await page.waitForTimeout(80);
  }
  const f = await where();
  check(f > 0 && f < 1, 'the zoomed view holds the peak (at ' + (100 * f).toFixed(1) + '% of its width)');
  return page.$eval('#timeline canvas', (c) => c.dataset.view);
}

// Every step the categories chart draws is a point of the CLI's series, and the most in
// its column of the points that hold there.
async function checkCats(page, series, t0, timed) {
  const st = await page.evaluate(() => window.gmReport.drawn.cats);
  if (!st) return;
  const xs = series.map((p) => (p.event < 0 ? 0 : timed ? p.time_us - t0 : p.event));
  const total = (p) => Object.values(p.bytes).reduce((a, b) => a + b, 0);
  const byK = new Map(series.map((p, i) => [p.event, i]));
  let bad = 0, first = null;
  for (const s of st.steps) {
    const i = byK.get(s.k);
    if (i === undefined) { bad++; first = first || 'event ' + s.k + ' is not a point of the series'; continue; }
    const p = series[i], cats = ['parameter', 'input', 'activation', 'gradient', 'optimizer_state', 'optimizer_temp', 'other'];
    if (cats.some((c, k) => p.bytes[c] !== s.bytes[k]) || Math.abs(xs[i] - s.x) > 1e-3) { bad++; first = first || 'event ' + s.k + ': bytes or x differ'; continue; }
    // the points that hold in [x0, x1): the last one before x0 (unless one is at x0) and those inside
    let j = 0, best = -1;
    while (j < series.length && xs[j] < s.x0) j++;
    if (j > 0 && (j === series.length || xs[j] > s.x0)) best = total(series[j - 1]);
    for (; j < series.length && xs[j] < s.x1; j++) best = Math.max(best, total(series[j]));
    if (best !== s.total) { bad++; first = first || 'event ' + s.k + ' [' + s.x0 + ', ' + s.x1 + '): ' + s.total + ' drawn, ' + best + ' the most there (x ' + xs[i] + ', series from ' + xs[0] + ' to ' + xs[xs.length - 1] + ')'; }
  }
  check(bad === 0 && st.steps.length > 0, 'categories chart: ' + st.steps.length + ' steps of a zoomed window agree with `snapshot categories --json --series`' + (bad ? ' (' + bad + ' differ: ' + first + ')' : ''));
}

// The page's allocator state at events against the library's layout.
async function checkState(page, args, snap, devIndex, n, peakK) {
  const r = rng(12345 + n);
  const ks = new Set([-1, peakK, n - 1]);
  while (ks.size < Math.min(n + 1, 15)) ks.add(Math.floor(r() * n));
  const sorted = Array.from(ks).filter((k) => k >= -1 && k < n).sort((a, b) => a - b);
  const lib = execFileSync(args.layout, [snap, String(devIndex)].concat(sorted.map(String)), { maxBuffer: 1 << 30 }).toString().trim().split('\n').map((l) => JSON.parse(l));
  let exact = 0, same = 0, first = null, blocks = 0;
  for (let i = 0; i < sorted.length; i++) {
    const st = await page.evaluate((k) => window.gmReport.stateAt(k), sorted[i]);
    if (!st || !st.exact) continue;
    exact++;
    const mine = JSON.stringify({ k: st.k, reserved: st.reserved, segments: st.segments });
    const want = JSON.stringify(lib[i]);
    if (mine === want) same++;
    else first = first || 'event ' + sorted[i] + ': page ' + mine.slice(0, 300) + ' vs library ' + want.slice(0, 300);
    for (const s of lib[i].segments) blocks += s[5].length;
  }
  check(exact > 0 && same === exact, 'allocator state at ' + exact + ' events (' + sorted.slice(0, 8).join(', ') + '...) equals the library\'s layout block for block (' + blocks + ' blocks)' + (first ? ': ' + first : ''));
}

async function testOne(chromium, args, snap, tmp, opts) {
  console.log('report of ' + snap + (opts.noAnalysis ? ' (--no-analysis)' : '') + (opts.quick ? ' (basic checks)' : ''));
  const html = path.join(tmp, path.basename(snap) + (opts.noAnalysis ? '.plain' : '') + '.html');
  const t0 = Date.now();
  execFileSync(args.gpumem, ['snapshot', 'report', snap, '-o', html, '--force', '--points', '2000'].concat(opts.noAnalysis ? ['--no-analysis'] : []));
  const genMs = Date.now() - t0;
  const peakJson = json(args.gpumem, ['snapshot', 'peak', snap, '--json']);
  const size = fs.statSync(html).size;
  const P = await open(chromium, tmp, html, 1400);
  const page = P.page;
  const nDev = await page.$$eval('#device option', (o) => o.length);
  const wantOf = (dr) => peakJson.devices.find((d) => d.device === dr.device);
  if (nDev > 0) {
    const dr0 = await drawnOf(page);
    const want0 = wantOf(dr0);
    // the page opens on an out-of-memory event when the file has one
    const oomDevs = opts.noAnalysis ? [] : json(args.gpumem, ['snapshot', 'oom', snap, '--json']).devices.filter((d) => (d.ooms || []).length);
    if (oomDevs.length) {
      const o = oomDevs[0].ooms[0];
      const banner = await page.$eval('#banner', (b) => ({ hidden: b.hidden, text: b.textContent, device: b.dataset.device }));
      check(dr0.device === oomDevs[0].device, 'opens on cuda:' + oomDevs[0].device + ', the device of the out-of-memory event (shown: cuda:' + dr0.device + ')');
      check(!banner.hidden && banner.text.includes(o.verdict) && banner.text.replace(/,/g, '').includes(String(o.requested_bytes)),
        'banner names the verdict (' + o.verdict + ') and the request (' + o.requested_bytes + ' bytes): "' + banner.text.slice(0, 90) + '..."');
      check(dr0.tl && dr0.tl.ooms >= 1, 'the timeline marks the out-of-memory event');
    } else if (!opts.noAnalysis) {
      check(await page.$eval('#banner', (b) => b.hidden), 'no out-of-memory banner');
    }
    // every view draws
    const painted = (sel) => page.$eval(sel, (c) => {
      const g = c.getContext('2d'), d = g.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    const hasTrace = await page.evaluate(() => !document.getElementById('v-timeline').hidden);
    if (hasTrace) {
      check(Number(await page.$eval('#timeline canvas', (c) => c.dataset.drawn)) > 0 && await painted('#timeline canvas') > 5000, 'timeline draws');
      check(!dr0.cats || await painted('#cats canvas') > 5000, 'categories over time draw');
      check(await painted('#segtl canvas') > 2000, 'segment timeline draws');
    } else {
      const nt = await page.evaluate(() => ({ shown: !document.getElementById('v-notrace').hidden, where: document.getElementById('peak-where').textContent, cats: document.getElementById('v-categories').hidden }));
      check(nt.shown && nt.cats && /no trace/.test(nt.where), 'no trace: no timeline drawn, said so ("' + nt.where + '")');
    }
    const rows = await page.$$eval('#peak-table tr.row', (r) => r.length);
    const groups = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const cur = window.gmReport.devices()[window.gmReport.current()];
      const d = D.ranks[cur.rank].devices.find((x) => x.device === cur.device);
      return { rows: d.at_peak.length, groups: d.at_peak_groups };
    });
    check(rows === groups.rows, 'at-the-peak table has ' + rows + ' rows');
    check(!want0 || groups.groups === want0.live_groups, 'at the peak: ' + groups.groups + ' stacks, as `snapshot peak --json` counts them (' + (want0 && want0.live_groups) + ')');
    check(await painted('#segments canvas') > 200 || opts.noAnalysis, 'allocator state draws');
    check(await painted('#flame canvas') > 200, 'icicle of the peak draws');
    check(Number(await page.$eval('#findings', (f) => f.dataset.drawn || '0')) >= 2, 'findings are shown');
    const setRows = await page.evaluate(() => {
      const dl = document.querySelectorAll('#findings dl.meta')[1];
      return dl ? { rows: Number(dl.dataset.rows), dotted: Array.from(dl.querySelectorAll('dt')).filter((e) => e.textContent.includes('.')).length } : null;
    });
    if (setRows) check(setRows.dotted === 0, 'settings: nested values folded into one row per key (' + setRows.rows + ' rows)');

    // many iterations are summarised, the full table only on request
    const iters = () => page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const cur = window.gmReport.devices()[window.gmReport.current()];
      const d = D.ranks[cur.rank].devices.find((x) => x.device === cur.device);
      const f = document.querySelector('#findings .iters');
      return { n: (d.iterations || []).length, rows: f ? f.querySelectorAll('tbody tr').length : 0, elements: document.getElementsByTagName('*').length };
    });
    const it0 = await iters();
    if (it0.n > 20) {
      check(it0.rows >= 1 && it0.rows <= 11, it0.n + ' iterations summarised in ' + it0.rows + ' rows');
      await page.click('#findings .iters button');
      check((await iters()).rows === it0.rows + it0.n, 'the full table of the iterations on request');
      await page.click('#findings .iters button');
      await page.evaluate(() => window.scrollTo(0, 0));
    } else {
      check(it0.rows === it0.n, it0.n + ' iteration(s), each in the table');
    }
    if (args.timing) console.log('  timing: ' + it0.elements + ' elements on the page');

    // the peak shown equals `gpumem snapshot peak --json`
    const shown = await page.evaluate(() => ({ bytes: document.getElementById('peak-bytes').dataset.bytes, text: document.getElementById('peak-bytes').textContent }));
    check(want0 && String(want0.peak_bytes) === shown.bytes && shown.text.replace(/,/g, '').includes(String(want0.peak_bytes)),
      'peak shown ' + shown.text + ' equals peak --json ' + (want0 && want0.peak_bytes));

    if (!opts.quick && hasTrace) {
      // every device with a trace, at three widths, then zoomed
      for (const w of WIDTHS) {
        await setWidth(page, w);
        for (let d = 0; d < nDev; d++) {
          await page.evaluate((i) => window.gmReport.select(i), d);
          const dr = await drawnOf(page);
          if (!dr.tl) continue;
          checkPictures(dr, wantOf(dr), 'cuda:' + dr.device + ' at ' + w + ' px');
          const px = await peakPixels(page);
          check(px && px.ok, 'cuda:' + dr.device + ' at ' + w + ' px: the pixels of the highest column are painted up to the peak\'s height (y ' + (px && px.want.toFixed(1)) + (px && !px.ok ? '; ' + px.why : '') + ')');
        }
        const dr = await drawnOf(page);
        if (w === 390) check(dr.sw <= dr.iw, 'at 390 px the page is no wider than the window (' + dr.sw + ' px)');
        if (args.screenshot && opts.first) {
          fs.mkdirSync(args.screenshot, { recursive: true });
          await page.evaluate((i) => window.gmReport.select(i), dr0.device === undefined ? 0 : await page.evaluate(() => window.gmReport.current()));
          await page.screenshot({ path: path.join(args.screenshot, 'report-' + w + '.png'), fullPage: true });
        }
      }
      await setWidth(page, 1400);
      for (let d = 0; d < nDev; d++) {
        await page.evaluate((i) => window.gmReport.select(i), d);
        const dr = await drawnOf(page);
        if (!dr.tl) continue;
        const before = dr.tl.view.join(',');
        const after = await zoomOnPeak(page);
        const dz = await drawnOf(page);
        check(after !== before, 'cuda:' + dr.device + ': the wheel zooms (' + before + ' -> ' + after + ')');
        checkPictures(dz, wantOf(dz), 'cuda:' + dz.device + ' zoomed');
        const pz = await peakPixels(page);
        check(pz && pz.ok, 'cuda:' + dz.device + ' zoomed: the pixels of the highest column are painted up to the peak\'s height (y ' + (pz && pz.want.toFixed(1)) + (pz && !pz.ok ? '; ' + pz.why : '') + ')');
        if (!opts.noAnalysis && dz.cats) {
          const cat = json(args.gpumem, ['snapshot', 'categories', '--json', '--series', '--device', String(dz.device), snap]);
          const cd = cat.devices.find((x) => x.device === dz.device);
          const dv = await page.evaluate(() => { const c = window.gmReport.devices()[window.gmReport.current()]; const D = JSON.parse(document.getElementById('gm-data').textContent); const d = D.ranks[c.rank].devices.find((x) => x.device === c.device); return { t0: d.t0_us, timed: d.x_unit === 'us' }; });
          await checkCats(page, cd.series, dv.t0, dv.timed);
        }
        // drag pans, double-click resets
        await page.$eval('#timeline', (e) => e.scrollIntoView());
        const box = await page.$eval('#timeline canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width }; });
        const z = await page.$eval('#timeline canvas', (c) => c.dataset.view);
        await page.mouse.move(box.x + 74 + (box.w - 90) * 0.5, box.y + 100);
        await page.mouse.down();
        await page.mouse.move(box.x + 74 + (box.w - 90) * 0.3, box.y + 100, { steps: 4 });
        await page.mouse.up();
        const panned = await page.$eval('#timeline canvas', (c) => c.dataset.view);
        await page.mouse.dblclick(box.x + 74 + (box.w - 90) * 0.5, box.y + 100);
        const reset = await page.$eval('#timeline canvas', (c) => c.dataset.view);
        check(panned !== z && reset === before, 'cuda:' + dr.device + ': drag pans (' + z + ' -> ' + panned + '), double-click resets');
      }
      if (args.layout && !opts.noAnalysis) {
        for (let d = 0; d < nDev; d++) {
          await page.evaluate((i) => window.gmReport.select(i), d);
          const info = await page.evaluate(() => { const c = window.gmReport.devices()[window.gmReport.current()]; const D = JSON.parse(document.getElementById('gm-data').textContent); const dv = D.ranks[c.rank].devices.find((x) => x.device === c.device); return { device: c.device, n: dv.n_events, peak: dv.peak.k, state: !!dv.state }; });
          if (info.state && info.n > 0) await checkState(page, args, snap, info.device, info.n, info.peak);
        }
      }
    }
    // hover shows a stack: the columns at the peak first, then a grid over the chart
    await page.evaluate((i) => window.gmReport.select(i), 0);
    if (await page.evaluate(() => !document.getElementById('v-timeline').hidden)) {
      await page.$eval('#timeline', (e) => e.scrollIntoView());
      const box = await page.$eval('#timeline canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
      const peakX = await page.evaluate(() => {
        const D = JSON.parse(document.getElementById('gm-data').textContent);
        const d = D.ranks[0].devices[0];
        return d.x1 > d.x0 ? (d.peak.x - d.x0) / (d.x1 - d.x0) : 0.5;
      });
      const pw = Math.floor(box.w - 74 - 14), xs = [];
      for (const dx of [0, -1, 1, -2, 2]) xs.push(74 + Math.floor(peakX * pw) + dx + 0.5);
      for (let fx = 0.1; fx < 1; fx += 0.1) xs.push(74 + (box.w - 90) * fx);
      let stackShown = false;
      for (const px of xs) {
        for (let fy = 0.9; fy > 0.1 && !stackShown; fy -= 0.1) {
          await page.mouse.move(box.x + px, box.y + 12 + (box.h - 40) * fy);
          stackShown = await page.evaluate(() => { const t = document.getElementById('tip'); return !t.hidden && t.querySelectorAll('.frames li.user, .frames li.lib').length > 0; });
        }
        if (stackShown) break;
      }
      const bandStacks = await page.evaluate(() => {
        const D = JSON.parse(document.getElementById('gm-data').textContent);
        const r = D.ranks[0], d = r.devices[0];
        let top = 1;
        for (let i = 0; i < d.lod.n; i++) top = Math.max(top, d.lod.amax[i], d.lod.rmax[i]);
        return d.bands.filter((b) => (r.stacks[String(b[6])] || []).length > 0 && b[4] > 0.02 * top).length;
      });
      check(stackShown || bandStacks === 0, 'hovering the timeline shows a stack');
    }
    // every device and every moment
    for (let d = 0; d < nDev; d++) {
      await page.selectOption('#device', String(d));
      const nm = await page.$$eval('#moment option', (o) => o.length);
      for (let m = 1; m < nm; m++) await page.selectOption('#moment', String(m - 1));
    }
    check(true, nDev + ' device(s) and their moments selected');
  }
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  check(P.requests.length === 0, 'no network requests' + (P.requests.length ? ': ' + P.requests.join(' ') : ''));
  if (args.timing)
    console.log('  timing: snapshot ' + fs.statSync(snap).size + ' B, report ' + size + ' B (' +
      (100 * size / fs.statSync(snap).size).toFixed(1) + '%), written in ' + genMs + ' ms, loaded in ' + P.loadMs + ' ms');
  await P.ctx.close();
}

// The hue (degrees) and saturation of a pixel: shading a colour toward white or black, or
// drawing it translucent over the white page, keeps its hue.
function hueOf(r, g, b) {
  const mx = Math.max(r, g, b), mn = Math.min(r, g, b), d = mx - mn;
  if (!d) return { h: 0, s: 0 };
  let h = mx === r ? ((g - b) / d) % 6 : mx === g ? (b - r) / d + 2 : (r - g) / d + 4;
  h *= 60;
  return { h: h < 0 ? h + 360 : h, s: d / mx };
}

async function testBands(chromium, args, snap, tmp) {
  console.log('timeline bands of ' + snap);
  const html = path.join(tmp, path.basename(snap) + '.bands.html');
  execFileSync(args.gpumem, ['snapshot', 'report', snap, '-o', html, '--force']);
  const cat = json(args.gpumem, ['snapshot', 'categories', '--json', '--series', snap]);
  const peaks = json(args.gpumem, ['snapshot', 'peak', '--json', snap]);
  const P = await open(chromium, tmp, html, 1400);
  const page = P.page;
  const cur = await page.evaluate(() => window.gmReport.devices()[window.gmReport.current()].device);
  const cd = cat.devices.find((d) => d.device === cur), want = peaks.devices.find((d) => d.device === cur);
  const weights = cd.at_end.parameter;
  const stackOk = (t) => t.stackTop.every((v, i) => v === t.amax[i]);
  const t = await page.evaluate(() => window.gmReport.drawn.timeline);
  const label = path.basename(snap) + ' cuda:' + cur;
  const dv = await page.evaluate(() => { const c = window.gmReport.devices()[window.gmReport.current()]; const D = JSON.parse(document.getElementById('gm-data').textContent); const d = D.ranks[c.rank].devices.find((x) => x.device === c.device); return { t0: d.t0_us, timed: d.x_unit === 'us', x1: d.x1, n: d.n_events }; });
  // where the weights are all in place: the first point of the series from which on the
  // parameters never hold less
  const xs = cd.series.map((p) => (p.event < 0 ? 0 : dv.timed ? p.time_us - dv.t0 : p.event));
  let from = cd.series.length;
  while (from > 0 && cd.series[from - 1].bytes.parameter >= weights) from--;
  const c0 = from < xs.length ? Math.ceil(xs[from] / dv.x1 * t.pw) : t.pw; // the first column wholly after it
  const thin = t.byCat[0].map((v, x) => [x, v]).filter((p) => p[0] >= c0 && p[1] < weights);
  check(weights > 0 && c0 < t.pw && thin.length === 0, label + ': the ' + weights + ' bytes of parameters alive at the end are drawn as parameters in every column from ' + c0 + ' of ' + t.pw +
    (c0 === 0 ? ' (the whole width)' : ' (where they are all in place)') + (thin.length ? '; not in ' + thin.length + ', e.g. column ' + thin[0][0] + ': ' + thin[0][1] : ''));
  if (weights / t.ymax * t.ph >= 8) {
    const hues = await page.evaluate((w) => {
      const t = window.gmReport.drawn.timeline, c = document.querySelector('#timeline canvas'), dpr = window.devicePixelRatio || 1;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, out = [];
      const y = Math.floor((t.top + t.ph - w / 2 / t.ymax * t.ph) * dpr);
      for (let f = 0.02; f < 1; f += 0.08) {
        const x = Math.floor((t.left + Math.floor(f * t.pw) + 0.5) * dpr), o = (y * c.width + x) * 4;
        out.push([d[o], d[o + 1], d[o + 2]]);
      }
      return out;
    }, weights);
    for (let f = 0.02, i = 0; f < 1; f += 0.08, i++) if (Math.floor(f * t.pw) < c0) hues[i] = null;
    const param = hueOf(0x1f, 0x77, 0xb4).h;
    const off = hues.filter((p) => p).filter((p) => { const h = hueOf(p[0], p[1], p[2]); return h.s < 0.3 || Math.abs(h.h - param) > 12; });
    check(off.length === 0, label + ': at ' + hues.length + ' places across the width the middle of the weights is painted in the parameter colour (hue ' + param.toFixed(0) + ')' +
      (off.length ? '; not: rgb(' + off[0].join(',') + ')' : ''));
  }
  // the merged rest is a stack of categories, never grey
  const mergedCats = t.merged.map((v, k) => (v > 0 ? k : -1)).filter((k) => k >= 0);
  check(mergedCats.length > 0 && t.grey.every((v) => v === 0), label + ': the merged area is drawn in category colours (' + mergedCats.length + ' categories, no grey)');
  // hovering the merged stack where a category's part is tallest names that category
  const tallest = t.mergedAt.reduce((a, m) => (!a || m[3] - m[2] > a[3] - a[2] ? m : a), null);
  if (tallest && (tallest[3] - tallest[2]) / t.ymax * t.ph >= 4) {
    await page.$eval('#timeline', (e) => e.scrollIntoView());
    const b2 = await page.$eval('#timeline canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top }; });
    await page.mouse.move(b2.x + t.left + tallest[1] + 0.5, b2.y + t.top + t.ph - (tallest[2] + tallest[3]) / 2 / t.ymax * t.ph);
    const tip = await page.$eval('#tip', (e) => (e.hidden ? '' : e.textContent));
    const names = ['parameters', 'inputs', 'activations', 'gradients', 'optimizer state', 'optimizer temporaries', 'other'];
    check(tip.includes('category: ' + names[tallest[0]]) && tip.includes('merged'), label + ': hovering the merged ' + names[tallest[0]] + ' names them: "' + tip.slice(0, 90) + '"');
  }
  // the picture's top equals the numbers
  check(stackOk(t) && t.max === want.peak_bytes, label + ': in every column the bands and the merged categories add up to the most allocated, the highest to the peak ' + want.peak_bytes);
  check(t.bandCols === t.pw, label + ': bands are drawn in ' + t.bandCols + ' of ' + t.pw + ' columns');
  // the allocations inside the trace (neither alive at its start nor at its end), by the
  // tenth of the trace the middle of their life falls in
  const tenths = (bands, x1, n) => {
    const v = new Array(10).fill(0);
    for (const b of bands) if (b[0] >= 0 && b[1] < n) v[Math.min(9, Math.floor(5 * (b[2] + b[3]) / x1))]++;
    return v;
  };
  const dataOf = (file) => {
    const m = /<script type="application\/json" id="gm-data">([\s\S]*?)<\/script>/.exec(fs.readFileSync(file, 'utf8'));
    return JSON.parse(m[1].replace(/<\\\//g, '</'));
  };
  const shown = dataOf(html).ranks[0].devices.find((d) => d.device === cur);
  if (shown.n_events >= 1000) {
    const every = path.join(tmp, path.basename(snap) + '.every.html');
    execFileSync(args.gpumem, ['snapshot', 'report', snap, '-o', every, '--force', '--bands', String(Math.min(shown.n_allocs, 100000))]);
    const all = tenths(dataOf(every).ranks[0].devices.find((d) => d.device === cur).bands, shown.x1, shown.n_events);
    fs.rmSync(every);
    const got = tenths(shown.bands, shown.x1, shown.n_events);
    check(got.every((n, i) => n > 0 || all[i] === 0), label + ': allocations inside the trace are drawn one by one in every tenth of it that has any (' + got.join(', ') + ' of ' + all.join(', ') + ')');
  }
  if (cd.peak_iteration) {
    const where = await page.$eval('#peak-where', (e) => e.textContent);
    const hint = await page.$eval('#peak-hint', (e) => e.textContent);
    const it = 'iteration ' + cd.peak_iteration + ' of ' + cd.iterations.toLocaleString('en-US');
    check(where.includes(it) && hint.includes(it), label + ': the peak is in "' + it + '", as `snapshot categories` numbers it');
  }
  // the moments named after an iteration's peak and the iterations table: numbered from 1
  if (cd.iteration_peaks && cd.iteration_peaks.length) {
    const m = await page.evaluate(() => ({
      moments: Array.from(document.querySelectorAll('#moment option')).map((o) => o.textContent),
      rows: Array.from(document.querySelectorAll('#findings .iters tbody tr')).map((tr) => Number(tr.firstChild.textContent)),
    }));
    const named = m.moments.map((t) => /event (\d+):.*peak of iteration (\d+) of/.exec(t)).filter((x) => x);
    const wrong = named.filter((x) => { const p = cd.iteration_peaks.find((q) => q.iteration === Number(x[2])); return !p || p.peak_event_index !== Number(x[1]); });
    check(named.length > 0 && wrong.length === 0, label + ': ' + named.length + ' moments named "peak of iteration N of M", each at the event `snapshot categories --json` gives iteration N\'s peak' +
      (wrong.length ? ' (not: ' + wrong[0][0] + ')' : ''));
    check(m.rows.length > 0 && m.rows[0] === 1 && m.rows.every((n) => n >= 1 && n <= cd.iterations), label + ': the iterations table numbers them from 1 to ' + cd.iterations + ' (' + m.rows.slice(0, 4).join(', ') + '...)');
  }
  // zoomed onto the peak, with the windows' own bands taken out of the merged stack
  if (dv.n >= 100) {
    await zoomOnPeak(page);
    const z = await page.evaluate(() => window.gmReport.drawn.timeline);
    check(stackOk(z) && z.grey.every((v) => v === 0) && z.max === want.peak_bytes, label + ' zoomed: bands and merged categories add up to the most allocated in every column, the highest to the peak');
  }
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

async function testRanks(chromium, args, files, tmp) {
  console.log('rank report of ' + files.join(' '));
  const html = path.join(tmp, 'job.html');
  execFileSync(args.gpumem, ['snapshot', 'report'].concat(files, ['-o', html, '--force']));
  const peaks = files.map((f) => {
    const p = json(args.gpumem, ['snapshot', 'peak', f, '--json']);
    // the rank's device: of those with a trace or segments, the one with the highest peak
    // (gm_analysis_rank_device)
    return p.devices.filter((d) => d.trace_events > 0 || d.peak_bytes > 0).reduce((a, d) => (d.peak_bytes > a.peak_bytes ? d : a));
  });
  const P = await open(chromium, tmp, html, 1400);
  const r = await P.page.evaluate(() => ({
    shown: !document.getElementById('v-ranks').hidden,
    rows: document.querySelectorAll('#ranks-table tbody tr').length,
    text: document.getElementById('imbalance').textContent,
    ratio: Number(document.getElementById('imbalance').dataset.ratio),
    maxRank: Number(document.getElementById('imbalance').dataset.maxRank),
    charts: Array.from(document.querySelectorAll('#ranks-charts canvas')).map((c) => Number(c.dataset.max)),
    devices: window.gmReport.devices(),
  }));
  const hi = peaks[0].peak_bytes >= peaks[1].peak_bytes ? 0 : 1, lo = 1 - hi;
  check(r.shown && r.rows === files.length, 'both ranks are shown side by side (' + r.rows + ' rows)');
  check(r.devices.some((d) => d.rank === 1 && d.device === peaks[1].device), 'rank 1 is its file\'s cuda:' + peaks[1].device + ', whatever its index');
  check(r.maxRank === hi && Math.abs(r.ratio - peaks[hi].peak_bytes / peaks[lo].peak_bytes) < 1e-9,
    'imbalance: rank ' + r.maxRank + ' highest, ratio ' + r.ratio.toFixed(4) + ' = ' + peaks[hi].peak_bytes + ' / ' + peaks[lo].peak_bytes);
  check(r.text.replace(/,/g, '').includes(String(peaks[hi].peak_bytes)) && r.text.replace(/,/g, '').includes(String(peaks[lo].peak_bytes)) && /mostly|differs most/.test(r.text),
    'the imbalance names both peaks and the category that makes the difference: "' + r.text.slice(0, 120) + '..."');
  check(r.charts.length === 2 && r.charts[0] === peaks[0].peak_bytes && r.charts[1] === peaks[1].peak_bytes, 'each rank\'s timeline draws its peak (' + r.charts.join(', ') + ')');
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

// --many-ranks DIR: a folder of 16 rank files or more (snapshots and digests mixed): the
// header holds the job's peak and its rank, the heatmap draws every rank (ranks x time) and
// the outliers are those `snapshot stats --json` finds.
async function testManyRanks(chromium, args, dir, tmp) {
  console.log('job page of the ranks in ' + dir);
  const html = path.join(tmp, 'many.html');
  execFileSync(args.gpumem, ['snapshot', 'report', dir, '-o', html, '--force']);
  const st = json(args.gpumem, ['snapshot', 'stats', '--json', dir]);
  const top = st.ranks.find((r) => r.rank === st.imbalance.max_rank);
  const P = await open(chromium, tmp, html, 1400);
  const r = await P.page.evaluate(() => ({
    peak: Number(document.getElementById('peak-bytes').dataset.bytes),
    where: document.getElementById('peak-where').textContent,
    peakRank: Number(document.getElementById('peak-where').dataset.rank),
    heatHidden: document.getElementById('rank-heatmap-wrap').hidden,
    heatRows: Number(document.querySelector('#rank-heatmap canvas').dataset.rows),
    heatMax: Number(document.querySelector('#rank-heatmap canvas').dataset.max),
    outliers: document.getElementById('rank-outliers').dataset.ranks || '',
    rows: Array.from(document.querySelectorAll('#ranks-table tbody tr')).map((tr) => Number(tr.firstChild.textContent)),
  }));
  check(r.peak === top.peak_bytes && r.peakRank === top.rank, 'the header shows the job\'s peak ' + r.peak + ' and its rank ' + r.peakRank + ': "' + r.where + '"');
  check(!r.heatHidden && r.heatRows === st.ranks.length, 'the heatmap draws every rank (' + r.heatRows + ' of ' + st.ranks.length + ')');
  check(r.heatMax > 0 && r.heatMax <= top.peak_bytes, 'its hottest cell is within the job\'s peak (' + r.heatMax + ')');
  check(r.outliers === String(top.rank), 'the outlier is the skewed rank (' + r.outliers + ')');
  check(r.rows.length === st.ranks.length && r.rows.every((v, i) => v === st.ranks[i].rank), 'the table lists the ranks in rank order, numbered as the CLI numbers them');
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

async function testPhases(chromium, args, file, tmp) {
  console.log('user phases of ' + file);
  // the peak's phase as the CLI names it
  const name = json(args.gpumem, ['snapshot', 'peak', file, '--json']).devices[0].peak_user_phase;
  const html = path.join(tmp, 'phases.html');
  execFileSync(args.gpumem, ['snapshot', 'report', file, '-o', html, '--force']);
  const P = await open(chromium, tmp, html, 1400);
  const r = await P.page.evaluate(() => ({ where: document.getElementById('peak-where').textContent, drawn: window.gmReport.drawn.timeline.uphases }));
  check(r.drawn > 0, r.drawn + ' user phases (gpumem.phase: annotations) drawn as bands');
  check(name && r.where.includes('"' + name + '"'), 'the peak\'s phase is named as `snapshot peak --json` names it (' + name + '): "' + r.where + '"');
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

// Every record_function range (any name) as a band along the timeline's bottom, with the
// bytes `snapshot regions --json` gives; and the categories of a report made with the user's
// category rules are those `snapshot categories --categories` gives.
async function testAnnotationsAndRules(chromium, args, file, tmp) {
  console.log('record_function ranges and category rules of ' + file);
  const want = json(args.gpumem, ['snapshot', 'regions', file, '--json']).devices[0].regions;
  const rules = path.join(tmp, 'rules.json');
  fs.writeFileSync(rules, JSON.stringify({ rules: [{ category: 'activation', function: '^cross_entropy$' }] }));
  const cats = json(args.gpumem, ['snapshot', 'categories', file, '--json', '--categories', rules]).devices[0].at_peak;
  const plain = json(args.gpumem, ['snapshot', 'categories', file, '--json']).devices[0].at_peak;
  const html = path.join(tmp, 'annotations.html');
  execFileSync(args.gpumem, ['snapshot', 'report', file, '--categories', rules, '-o', html, '--force']);
  const P = await open(chromium, tmp, html, 1400);
  const r = await P.page.evaluate(() => {
    const D = JSON.parse(document.getElementById('gm-data').textContent);
    const cur = window.gmReport.devices()[window.gmReport.current()];
    const d = D.ranks[cur.rank].devices.find((x) => x.device === cur.device);
    return { annotations: d.annotations, cats: d.at_peak_cat, drawn: window.gmReport.drawn.timeline.annotations };
  });
  check(want.length > 0 && r.annotations.length === want.length, r.annotations.length + ' ranges in the page, as `snapshot regions --json` lists them (' + want.length + ')');
  check(r.annotations.every((a, i) => a[2] === want[i].name && a[3] === want[i].start_bytes && a[4] === want[i].peak_bytes && a[5] === want[i].end_bytes), 'each range with the bytes at its start, its peak and its end of `snapshot regions`');
  check(r.drawn === want.length, r.drawn + ' ranges drawn as bands on the whole trace');
  const names = ['parameter', 'input', 'activation', 'gradient', 'optimizer_state', 'optimizer_temp', 'other'];
  check(names.every((n, i) => r.cats[i] === cats[n]) && cats.activation > plain.activation, 'the categories at the peak are those of `snapshot categories --categories` (activation ' + r.cats[2] + ', ' + plain.activation + ' without the rules)');
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

async function testAccount(chromium, args, snap, account, tmp) {
  console.log('whole-device account of ' + account + ' beside ' + snap);
  const html = path.join(tmp, 'account.html');
  execFileSync(args.gpumem, ['snapshot', 'report', snap, '--account', account, '-o', html, '--force']);
  const want = json(args.gpumem, ['account', '--input', account, '--json']).processes
    .flatMap((p) => p.devices.filter((d) => d.peak).map((d) => ({ pid: p.pid, device: d.device, used: d.peak.used, terms: d.peak.terms.length })));
  const P = await open(chromium, tmp, html, 1400);
  const r = await P.page.evaluate(() => ({
    shown: !document.getElementById('v-account').hidden,
    drawn: window.gmReport.drawn.account,
    bars: document.querySelectorAll('#account .acct-bar').length,
    marks: document.querySelectorAll('#account .acct-mark').length,
  }));
  check(r.shown && r.drawn && r.drawn.length === want.length && r.bars === want.length,
    'one bar per equation of `gpumem account --json` (' + (r.drawn ? r.drawn.length : 0) + ' of ' + want.length + ')');
  check(r.drawn && r.drawn.every((e, i) => e.pid === want[i].pid && e.device === want[i].device && e.used === want[i].used && e.sum === e.used && e.terms === want[i].terms),
    'each bar\'s terms add up to the device used `gpumem account --json` gives, to the byte');
  check(r.marks > 0, 'the snapshot\'s highest reserved is marked on the bars of its device (' + r.marks + ')');
  check(P.errors.length === 0, 'no console errors' + (P.errors.length ? ': ' + P.errors.join(' | ') : ''));
  await P.ctx.close();
}

async function main() {
  const args = parseArgs(process.argv);
  let chromium;
  try {
    chromium = require('playwright-core').chromium;
  } catch (e) {
    console.log('skipped: playwright-core is not installed (run scripts/install-deps.sh)');
    process.exit(process.env.CI ? 1 : 77); // CI must run it, never skip
  }
  if (!fs.existsSync(CHROMIUM)) {
    console.log('skipped: ' + CHROMIUM + ' is missing (run scripts/install-deps.sh)');
    process.exit(process.env.CI ? 1 : 77);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-browser-'));
  try {
    let first = true;
    for (const s of args.snapshots) { await testOne(chromium, args, s, tmp, { first }); first = false; }
    for (const s of args.quick) await testOne(chromium, args, s, tmp, { quick: true });
    for (const s of args.bands) await testBands(chromium, args, s, tmp);
    if (args.noAnalysis && args.snapshots.length) await testOne(chromium, args, args.snapshots[0], tmp, { noAnalysis: true, quick: true });
    if (args.ranks) await testRanks(chromium, args, args.ranks, tmp);
    for (const d of args.manyRanks) await testManyRanks(chromium, args, d, tmp);
    for (const p of args.phases) await testPhases(chromium, args, p, tmp);
    for (const p of args.phases) await testAnnotationsAndRules(chromium, args, p, tmp);
    if (args.account && args.snapshots.length) await testAccount(chromium, args, args.snapshots[0], args.account, tmp);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(failures ? failures + ' check(s) failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(1); });
