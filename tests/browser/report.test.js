// SPDX-License-Identifier: MIT
// report.test.js - gpumem's HTML report in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core; no browser download).
//
//   node report.test.js --gpumem BIN --snapshot FILE [--snapshot FILE...] [--screenshot PNG]
//                       [--timing] [--also-no-analysis]
//
// For each snapshot: writes the report with `gpumem snapshot report`, opens it from file://
// and checks: zero console errors and page errors, zero network requests (anything but the
// report file itself), every view draws (canvases have painted pixels, the table has rows,
// the findings are there, many iterations are summarised with the full table on request),
// hovering the timeline shows a stack, drag-zoom changes the view,
// every device and every moment can be selected without error, and the peak shown equals
// `gpumem snapshot peak --json`.  --screenshot writes a PNG of the first report;
// --timing prints the load time and the report size; --also-no-analysis tests the first
// snapshot's report without the analysis too.  Exit 0 ok, 1 failure, 77 skipped
// (no Chromium or no playwright-core: run scripts/install-deps.sh).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const CHROMIUM = process.env.GM_CHROMIUM || '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

function parseArgs(argv) {
  const a = { snapshots: [], gpumem: process.env.GPUMEM, screenshot: null, timing: false, noAnalysis: false };
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--gpumem') a.gpumem = argv[++i];
    else if (argv[i] === '--snapshot') a.snapshots.push(argv[++i]);
    else if (argv[i] === '--screenshot') a.screenshot = argv[++i];
    else if (argv[i] === '--timing') a.timing = true;
    else if (argv[i] === '--also-no-analysis') a.noAnalysis = true;
    else throw new Error('unknown argument ' + argv[i]);
  }
  if (!a.gpumem || !a.snapshots.length) throw new Error('usage: report.test.js --gpumem BIN --snapshot FILE...');
  return a;
}

let failures = 0;
function check(cond, what) {
  if (cond) { console.log('  ok   ' + what); return; }
  console.log('  FAIL ' + what);
  failures++;
}

async function testOne(chromium, args, snap, tmp, first, noAnalysis) {
  console.log('report of ' + snap + (noAnalysis ? ' (--no-analysis)' : ''));
  const html = path.join(tmp, path.basename(snap) + (noAnalysis ? '.plain' : '') + '.html');
  const t0 = Date.now();
  execFileSync(args.gpumem, ['snapshot', 'report', snap, '-o', html, '--force'].concat(noAnalysis ? ['--no-analysis'] : []));
  const genMs = Date.now() - t0;
  const peakJson = JSON.parse(execFileSync(args.gpumem, ['snapshot', 'peak', snap, '--json'], { maxBuffer: 1 << 28 }).toString());
  const size = fs.statSync(html).size;

  const profile = fs.mkdtempSync(path.join(tmp, 'profile-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 900 },
  });
  const errors = [], requests = [];
  const url = 'file://' + html;
  ctx.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  const tl = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 120000 });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  const loadMs = Date.now() - tl;

  const nDev = await page.$$eval('#device option', (o) => o.length);
  if (nDev > 0) {
    // every view draws
    const painted = (sel) => page.$eval(sel, (c) => {
      const g = c.getContext('2d'), d = g.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    check(Number(await page.$eval('#timeline canvas', (c) => c.dataset.drawn)) > 0 && await painted('#timeline canvas') > 5000, 'timeline draws');
    const hasSeries = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const d = D.devices[Number(document.getElementById('device').value)];
      return !!(d.series && d.series.x.length > 1);
    });
    check(!hasSeries || (Number(await page.$eval('#cats canvas', (c) => c.dataset.drawn)) > 0 && await painted('#cats canvas') > 5000), 'categories over time draw');
    const rows = await page.$$eval('#peak-table tr.row', (r) => r.length);
    const liveAtPeak = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      return D.devices[Number(document.getElementById('device').value)].at_peak.length;
    });
    check(rows === liveAtPeak && (rows > 0 || liveAtPeak === 0), 'at-the-peak table has ' + rows + ' rows');
    check(Number(await page.$eval('#segments canvas', (c) => c.dataset.drawn || '0')) >= 0 && await painted('#segments canvas') > 200, 'segments view draws');
    check(Number(await page.$eval('#findings', (f) => f.dataset.drawn || '0')) >= 2, 'findings are shown');

    // the page stays small: many iterations are summarised (the first and at most 10 outliers),
    // the full table only on request
    const iters = () => page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const d = D.devices[Number(document.getElementById('device').value)];
      const f = document.querySelector('#findings .iters');
      return { n: (d.iterations || []).length, rows: f ? f.querySelectorAll('tbody tr').length : 0,
        elements: document.getElementsByTagName('*').length };
    });
    const it0 = await iters();
    if (it0.n > 20) {
      check(it0.rows >= 1 && it0.rows <= 11, it0.n + ' iterations summarised in ' + it0.rows + ' rows');
      await page.click('#findings .iters button');
      const it1 = await iters();
      check(it1.rows === it0.rows + it0.n, 'the full table of the iterations on request (' + it1.rows + ' rows)');
      await page.click('#findings .iters button');
      check((await iters()).rows === it0.rows, 'and hidden again');
      await page.evaluate(() => window.scrollTo(0, 0)); // the clicks scrolled to the findings
    } else {
      check(it0.rows === it0.n, it0.n + ' iteration(s), each in the table');
    }
    if (args.timing) console.log('  timing: ' + it0.elements + ' elements on the page');

    // the peak shown equals `gpumem snapshot peak --json`
    const shown = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const e = document.getElementById('peak-bytes');
      return { device: D.devices[Number(document.getElementById('device').value)].device, bytes: e.dataset.bytes, text: e.textContent };
    });
    const want = peakJson.devices.find((d) => d.device === shown.device);
    check(want && String(want.peak_bytes) === shown.bytes && shown.text.replace(/,/g, '').includes(String(want.peak_bytes)),
      'peak shown ' + shown.text + ' equals peak --json ' + (want && want.peak_bytes));

    // hover shows a stack: scan the timeline for a band with frames
    const box = await page.$eval('#timeline canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
    // first the columns at the peak (where the largest allocations alive then are drawn one by
    // one, however short-lived they are), then a grid over the whole chart
    const peakX = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const d = D.devices[Number(document.getElementById('device').value)];
      return d.x1 > d.x0 ? (d.peak.x - d.x0) / (d.x1 - d.x0) : 0.5;
    });
    const pw = Math.floor(box.w - 74 - 14), xs = [];
    for (const dx of [0, -1, 1, -2, 2]) xs.push(74 + Math.floor(peakX * pw) + dx + 0.5);
    for (let fx = 0.1; fx < 1; fx += 0.1) xs.push(74 + (box.w - 90) * fx);
    let stackShown = false;
    for (const px of xs) {
      for (let fy = 0.9; fy > 0.1 && !stackShown; fy -= 0.1) {
        await page.mouse.move(box.x + px, box.y + 12 + (box.h - 40) * fy);
        stackShown = await page.evaluate(() => {
          const t = document.getElementById('tip');
          return !t.hidden && t.querySelectorAll('.frames li.user, .frames li.lib').length > 0;
        });
      }
      if (stackShown) break;
    }
    const bandStacks = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const d = D.devices[Number(document.getElementById('device').value)];
      // bands with a stack that are tall enough to hover (2% of the chart's height)
      let top = 1;
      for (const l of d.lod) for (let i = 0; i < l.n; i++) top = Math.max(top, l.amax[i], l.rmax[i]);
      return d.bands.filter((b) => (D.stacks[String(b[6])] || []).length > 0 && b[4] > 0.02 * top).length;
    });
    check(stackShown || bandStacks === 0, 'hovering the timeline shows a stack');
    // drag to zoom, double-click to reset
    const before = await page.$eval('#timeline canvas', (c) => c.dataset.view);
    const bandsBefore = Number(await page.$eval('#timeline canvas', (c) => c.dataset.bands));
    await page.mouse.move(box.x + 74 + (box.w - 90) * 0.3, box.y + 100);
    await page.mouse.down();
    await page.mouse.move(box.x + 74 + (box.w - 90) * 0.6, box.y + 100, { steps: 4 });
    await page.mouse.up();
    const zoomed = await page.$eval('#timeline canvas', (c) => c.dataset.view);
    const bandsZoomed = Number(await page.$eval('#timeline canvas', (c) => c.dataset.bands));
    const hasRegional = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      return (D.devices[Number(document.getElementById('device').value)].rbands || []).length > 0;
    });
    check(!hasRegional || bandsZoomed > bandsBefore, 'zooming in draws more allocations one by one (' + bandsBefore + ' -> ' + bandsZoomed + ')');
    await page.mouse.dblclick(box.x + 74 + (box.w - 90) * 0.5, box.y + 100);
    const reset = await page.$eval('#timeline canvas', (c) => c.dataset.view);
    const range = await page.evaluate(() => {
      const D = JSON.parse(document.getElementById('gm-data').textContent);
      const d = D.devices[Number(document.getElementById('device').value)];
      return d.x1 - d.x0;
    });
    // a range of a few events or microseconds cannot be zoomed further
    check((zoomed !== before || range < 4) && reset === before, 'drag zooms (' + before + ' -> ' + zoomed + ') and double-click resets');
    // every device and every moment
    for (let d = 0; d < nDev; d++) {
      await page.selectOption('#device', String(d));
      const nm = await page.$$eval('#moment option', (o) => o.length);
      for (let m = 0; m < nm; m++) await page.selectOption('#moment', String(m));
    }
    check(true, nDev + ' device(s) and their moments selected');
  }
  if (first && args.screenshot) {
    await page.selectOption('#device', '0').catch(() => {});
    await page.setViewportSize({ width: 1200, height: 1100 });
    await page.evaluate(() => window.dispatchEvent(new Event('resize')));
    await page.waitForTimeout(400);
    await page.mouse.move(0, 0);
    fs.mkdirSync(path.dirname(path.resolve(args.screenshot)), { recursive: true });
    await page.screenshot({ path: args.screenshot, clip: { x: 0, y: 0, width: 1200, height: 1100 } });
    console.log('  screenshot: ' + args.screenshot);
  }
  check(errors.length === 0, 'no console errors' + (errors.length ? ': ' + errors.join(' | ') : ''));
  check(requests.length === 0, 'no network requests' + (requests.length ? ': ' + requests.join(' ') : ''));
  if (args.timing)
    console.log('  timing: snapshot ' + fs.statSync(snap).size + ' B, report ' + size + ' B (' +
      (100 * size / fs.statSync(snap).size).toFixed(1) + '%), written in ' + genMs + ' ms, loaded in ' + loadMs + ' ms');
  await ctx.close();
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
    process.exit(process.env.CI ? 1 : 77); // CI must run it, never skip
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gm-browser-'));
  try {
    let first = true;
    for (const s of args.snapshots) { await testOne(chromium, args, s, tmp, first, false); first = false; }
    if (args.noAnalysis) await testOne(chromium, args, args.snapshots[0], tmp, false, true);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(failures ? failures + ' check(s) failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(1); });
