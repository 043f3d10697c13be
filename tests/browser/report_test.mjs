// shardc report pages in a real browser (Debian chromium, headless, through playwright-core).
//
// For several shipped plans: `shardc report` writes the page; Chromium loads it from disk
// with the network unreachable; the DOM must show the world size, the memory figures of
// `shardc memory --format json` (every stage x kind x min/median/max, the peak, a selected
// rank's breakdown), one grid per mesh, a params table for the selected rank; no console
// error, no request other than the file itself; a screenshot at the expected size that is
// not blank; axe-core (WCAG 2 A/AA: labels, contrast, ...) finds no violation. A model whose
// names hold HTML must render them as text; a reshard page's heatmap must sum to the
// `reshard --format json` listing; a compiled OUTDIR's page must show `memory --format json`'s
// figures too, and a search page the rows, step terms and pruned counts of `search --format
// json`. Prints the load time and size of each page (measured, not asserted: the DeepSeek-V3
// 2,048-rank figure is quoted in docs/report.md).
//
// Usage: node report_test.mjs --shardc BIN [--chromium /usr/bin/chromium] [--keep DIR]
// Exit 0 all checks pass, 1 a check failed (each failure printed), 2 usage or set-up.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const require = createRequire(import.meta.url);

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const shardc = arg('--shardc');
const chromiumPath = arg('--chromium', '/usr/bin/chromium');
if (!shardc || !fs.existsSync(shardc)) {
  console.error('usage: node report_test.mjs --shardc BIN [--chromium PATH] [--keep DIR]');
  process.exit(2);
}
let playwright, axePath;
try {
  playwright = require('playwright-core');
  axePath = require.resolve('axe-core/axe.min.js');
} catch (e) {
  console.error(`browser test: npm packages missing (${e.message}); run tools/test (or ` +
                `"npm ci --prefix tests/browser") to install them`);
  process.exit(2);
}
if (!fs.existsSync(chromiumPath)) {
  console.error(`browser test: ${chromiumPath} not found (Debian package chromium; tools/test installs it)`);
  process.exit(2);
}

const work = arg('--keep') ?? fs.mkdtempSync(path.join(os.tmpdir(), 'shardc-report-'));
fs.mkdirSync(work, { recursive: true });
const failures = [];
function check(ok, what) {
  if (!ok) {
    failures.push(what);
    console.log(`FAIL ${what}`);
  }
}

function run(args, { allow = [0] } = {}) {
  try {
    return execFileSync(shardc, args, { cwd: root, encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    if (allow.includes(e.status)) return e.stdout;
    throw new Error(`shardc ${args.join(' ')}: exit ${e.status}\n${e.stderr}`);
  }
}

// The plans: [model, recipe, rank to select, what the plan exercises].
const plans = [
  ['plans/gpt2.model.yaml', 'plans/gpt2-tp4-tied.recipe.yaml', 5, 'tie, W-VOCAB warning'],
  ['plans/qwen3-30b-a3b.model.yaml', 'plans/qwen3-30b-a3b-ep8-fsdp.recipe.yaml', 3, 'expert mesh'],
  ['plans/megatron-llama-3-70b.model.yaml', 'plans/megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml', 300, 'pp 8, activations'],
  ['plans/deepseek-v3.model.yaml', 'plans/deepseek-v3-pp16-ep64.recipe.yaml', 1500, '2,048 ranks, pp 16, ep 64'],
];

// A model whose names are HTML: they must render as text and run nothing.
const hostileModel = path.join(work, 'hostile.model.yaml');
const hostileRecipe = path.join(work, 'hostile.recipe.yaml');
const hostileParam = 'layers.<script>window.__shardc_pwned=1</script>.weight';
fs.writeFileSync(hostileModel, [
  'format: shardc.model/v1',
  'name: "<img src=x onerror=window.__shardc_pwned=2>"',
  'dtype: float32',
  'params:',
  `  - {name: "${hostileParam}", shape: [64, 6]}`,
  '  - {name: "b&amp;\'q\\"", shape: [8]}',
  '',
].join('\n'));
fs.writeFileSync(hostileRecipe, [
  'format: shardc.recipe/v1',
  'mesh:',
  '  - {name: tp, size: 4}',
  'rules:',
  '  - match: "**"',
  '    placements: {tp: Shard(0)}',
  '',
].join('\n'));

function pngSize(buf) {
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardc-chromium-'));
const context = await playwright.chromium.launchPersistentContext(userDataDir, {
  executablePath: chromiumPath,
  headless: true,
  viewport: { width: 1280, height: 900 },
  bypassCSP: true, // lets axe-core's script in; the page's own CSP is checked without it below
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const axeSource = fs.readFileSync(axePath, 'utf8');

// Loads `file`, returns the page and what it logged.
async function open(file) {
  const page = await context.newPage();
  const log = { errors: [], requests: [] };
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') log.errors.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => log.errors.push(`pageerror: ${e.message}`));
  page.on('request', (r) => log.requests.push(r.url()));
  const t0 = Date.now();
  await page.goto('file://' + file, { waitUntil: 'load' });
  log.wallMs = Date.now() - t0;
  log.loadMs = await page.evaluate(() => {
    const n = performance.getEntriesByType('navigation')[0];
    return n.loadEventEnd - n.startTime;
  });
  return { page, log };
}

async function lint(page, name) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () =>
    await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }));
  for (const v of result.violations) {
    check(false, `${name}: axe ${v.id} (${v.impact}): ${v.help}; ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`);
  }
  return result.passes.length;
}

async function screenshotCheck(page, name) {
  const shot = await page.screenshot({ fullPage: false });
  fs.writeFileSync(path.join(work, `${name}.png`), shot);
  const size = pngSize(shot);
  check(size.width === 1280 && size.height === 900, `${name}: screenshot ${size.width}x${size.height}, expected 1280x900`);
  // Non-blank: decode it in the browser and count pixels that are not the background.
  const probe = await context.newPage();
  const share = await probe.evaluate(async (b64) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const px = g.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    const colours = new Set();
    for (let i = 0; i < px.length; i += 4) {
      if (px[i] < 240 || px[i + 1] < 240 || px[i + 2] < 240) ink++;
      if (i % 64 === 0) colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    }
    return { ink: ink / (px.length / 4), colours: colours.size };
  }, shot.toString('base64'));
  await probe.close();
  check(share.ink > 0.03 && share.colours > 8, `${name}: screenshot looks blank (ink ${share.ink}, ${share.colours} colours)`);
  return share;
}

const figures = [];
for (const [model, recipe, rank, what] of plans) {
  const name = path.basename(recipe, '.recipe.yaml');
  const html = path.join(work, `${name}.html`);
  run(['report', model, recipe, '-o', html]);  // default details: the peak rank, each stage's first
  const mem = JSON.parse(run(['memory', model, recipe, '--format', 'json', '--ranks', `${rank}`]));
  const diags = JSON.parse(run(['validate', model, recipe, '--format', 'json']) || '[]');
  const bytes = fs.statSync(html).size;
  const { page, log } = await open(html);
  check(log.errors.length === 0, `${name}: console: ${log.errors.join('; ')}`);
  check(log.requests.every((u) => u === 'file://' + html), `${name}: requests beyond the file: ${log.requests.filter((u) => u !== 'file://' + html).join(', ')}`);
  const dom = await page.evaluate(() => {
    const out = { world: document.getElementById('world')?.textContent, stages: {} };
    document.querySelectorAll('#memory-table td[data-bytes]').forEach((td) => {
      out.stages[`${td.dataset.stage}/${td.dataset.kind}/${td.dataset.stat}`] = td.dataset.bytes;
    });
    const peak = document.getElementById('peak');
    out.peak = { bytes: peak?.dataset.bytes, ranks: peak?.dataset.ranks };
    out.grids = [...document.querySelectorAll('svg.grid')].map((g) => ({ id: g.id, w: +g.getAttribute('width'), h: +g.getAttribute('height'), cols: +g.dataset.cols, cell: +g.dataset.cell }));
    out.bars = document.querySelectorAll('#memory-chart g.bar').length;
    out.largest = document.querySelectorAll('#largest-params tbody tr').length;
    out.diags = [...document.querySelectorAll('.diag')].map((d) => ({ code: d.dataset.code, loc: d.querySelector('.loc').textContent }));
    return out;
  });
  check(dom.world === `${mem.world_size} ranks`, `${name}: world '${dom.world}' vs ${mem.world_size}`);
  let compared = 0;
  for (const s of mem.stages) {
    for (const [kind, st] of Object.entries(s)) {
      if (kind === 'stage' || kind === 'num_ranks' || typeof st !== 'object') continue;
      for (const stat of ['min', 'median', 'max']) {
        const got = dom.stages[`${s.stage}/${kind}/${stat}`];
        check(got === String(st[stat]), `${name}: stage ${s.stage} ${kind} ${stat}: page ${got}, memory json ${st[stat]}`);
        compared++;
      }
    }
  }
  check(compared > 0 && compared === Object.keys(dom.stages).length, `${name}: ${compared} memory figures compared, the page has ${Object.keys(dom.stages).length}`);
  check(dom.peak.bytes === String(mem.peak.bytes) && dom.peak.ranks === mem.peak.ranks, `${name}: peak ${JSON.stringify(dom.peak)} vs ${mem.peak.bytes} on ${mem.peak.ranks}`);
  check(dom.grids.length === (mem.peak.first.coords.expert ? 2 : 1), `${name}: ${dom.grids.length} mesh grids`);
  for (const g of dom.grids) {
    check(g.cols * Math.ceil(mem.world_size / g.cols) * g.cell === g.h * g.cols && g.w === g.cols * g.cell, `${name}: grid ${g.id} ${g.w}x${g.h} for ${mem.world_size} ranks`);
  }
  check(dom.bars === 3 * mem.stages.length, `${name}: ${dom.bars} bars for ${mem.stages.length} stages`);
  check(dom.largest > 0, `${name}: no largest params`);
  check(dom.diags.length === diags.length && diags.every((d, i) => dom.diags[i].code === d.code && dom.diags[i].loc === `${d.file}:${d.line}:${d.column}`),
        `${name}: diagnostics ${JSON.stringify(dom.diags)} vs validate ${JSON.stringify(diags.map((d) => [d.code, d.file, d.line, d.column]))}`);
  // Select the rank by clicking its cell on the dense grid; its memory must be memory --ranks's.
  const g = dom.grids[0];
  await page.locator(`#${g.id}`).scrollIntoViewIfNeeded();
  const box = await page.locator(`#${g.id}`).boundingBox();
  await page.mouse.click(box.x + (rank % g.cols) * g.cell + g.cell / 2, box.y + Math.floor(rank / g.cols) * g.cell + g.cell / 2);
  const selected = () => page.evaluate(() => ({
    rank: document.getElementById('rank-summary').dataset.rank,
    memory: Object.fromEntries([...document.querySelectorAll('#rank-memory td[data-kind]')].map((td) => [td.dataset.kind, td.dataset.bytes])),
    table: [...document.querySelectorAll('.rank-detail:not([hidden]) table.rank-params')].map((t) => ({ rank: t.dataset.rank, count: +t.dataset.count })),
    noDetail: !document.getElementById('rank-no-detail').hidden,
    detailRanks: [...document.querySelectorAll('.rank-detail')].map((e) => +e.dataset.rank),
  }));
  let sel = await selected();
  check(sel.rank === String(rank), `${name}: clicking rank ${rank}'s cell selected ${sel.rank}`);
  for (const [kind, v] of Object.entries(mem.ranks[0].bytes)) {
    check(sel.memory[kind] === String(v), `${name}: rank ${rank} ${kind}: page ${sel.memory[kind]}, memory json ${v}`);
  }
  const embedded = sel.detailRanks.includes(rank);
  check(embedded ? sel.table.length === 1 && !sel.noDetail : sel.table.length === 0 && sel.noDetail,
        `${name}: rank ${rank} (details ${embedded ? '' : 'not '}embedded): ${JSON.stringify(sel.table)}, note shown ${sel.noDetail}`);
  // The peak rank's details are embedded by default: type it in the rank box.
  const peakRank = mem.peak.first.rank;
  check(sel.detailRanks[0] === peakRank, `${name}: details embedded for ${sel.detailRanks}, not first the peak rank ${peakRank}`);
  await page.fill('#rank-input', String(peakRank));
  await page.dispatchEvent('#rank-input', 'change');
  sel = await selected();
  check(sel.rank === String(peakRank) && sel.table.length === 1 && sel.table[0].rank === String(peakRank) && sel.table[0].count > 0 && !sel.noDetail,
        `${name}: params table of the peak rank ${peakRank}: ${JSON.stringify(sel.table)}`);
  check(sel.memory.total === String(mem.peak.bytes), `${name}: peak rank total ${sel.memory.total} vs ${mem.peak.bytes}`);
  await page.evaluate(() => window.scrollTo(0, 0));
  const shot = await screenshotCheck(page, name);
  const passes = await lint(page, name);
  figures.push({ name, what, ranks: mem.world_size, kib: Math.round(bytes / 1024), loadMs: Math.round(log.loadMs), wallMs: log.wallMs, compared, axePasses: passes, ink: shot.ink.toFixed(2) });
  await page.close();
}

// The page's own Content-Security-Policy: no error when loaded without bypassCSP either
// (a second browser context would cost a launch; the policy is checked as text instead).
{
  const text = fs.readFileSync(path.join(work, 'gpt2-tp4-tied.html'), 'utf8');
  check(/Content-Security-Policy" content="default-src 'none'/.test(text), 'page: no CSP forbidding network loads');
  check(!/(src|href)=["'](https?:)?\/\//.test(text), 'page: refers to a network resource');
}

// Escaping: HTML in param, model and axis names is text.
{
  const html = path.join(work, 'hostile.html');
  run(['report', hostileModel, hostileRecipe, '-o', html]);
  const { page, log } = await open(html);
  const got = await page.evaluate(() => ({
    pwned: window.__shardc_pwned ?? null,
    scripts: document.scripts.length,
    imgs: document.images.length,
    bolds: document.querySelectorAll('b').length,
    names: [...document.querySelectorAll('#largest-params td.mono:first-child')].map((td) => td.textContent),
    title: document.querySelector('h1').textContent,
    summary: document.getElementById('rank-summary').textContent,
  }));
  check(got.pwned === null, `hostile: a name ran as script (${got.pwned})`);
  check(got.scripts === 2 && got.imgs === 0 && got.bolds === 0, `hostile: names became elements: ${got.scripts} scripts, ${got.imgs} images, ${got.bolds} <b>`);
  check(got.names.includes(hostileParam), `hostile: param name not shown as text: ${JSON.stringify(got.names)}`);
  check(got.names.includes('b&amp;\'q"'), `hostile: param name with & ' " not shown as text: ${JSON.stringify(got.names)}`);
  check(got.title.includes('<img src=x onerror='), `hostile: model name not shown as text: ${got.title}`);
  check(got.summary.includes('tp=0'), `hostile: rank summary: ${got.summary}`);
  check(log.errors.length === 0, `hostile: console: ${log.errors.join('; ')}`);
  await page.close();
}

// A recipe that does not parse: the page holds its diagnostics (escaped, with file:line:col
// and the source line), and the exit code is the command's (2).
{
  const badRecipe = path.join(work, 'bad.recipe.yaml');
  fs.writeFileSync(badRecipe, 'format: shardc.recipe/v1\nmesh:\n  - {name: "tp<b>", size: 4}\nrules: []\n');
  const html = path.join(work, 'bad.html');
  run(['report', hostileModel, badRecipe, '-o', html], { allow: [2] });
  const diags = JSON.parse(run(['validate', hostileModel, badRecipe, '--format', 'json'], { allow: [2] }));
  const { page, log } = await open(html);
  const got = await page.evaluate(() => [...document.querySelectorAll('.diag')].map((d) => ({
    code: d.dataset.code, loc: d.querySelector('.loc').textContent, text: d.textContent,
    source: d.querySelector('pre')?.textContent ?? '' })));
  const bolds = await page.evaluate(() => document.querySelectorAll('b').length);
  check(got.length === diags.length && got.length > 0, `bad recipe: ${got.length} diagnostics on the page, validate ${diags.length}`);
  for (let i = 0; i < Math.min(got.length, diags.length); i++) {
    const d = diags[i];
    check(got[i].code === d.code && got[i].loc === `${d.file}:${d.line}:${d.column}` && got[i].text.includes(d.message),
          `bad recipe: diagnostic ${i}: ${JSON.stringify(got[i])} vs ${JSON.stringify(d)}`);
  }
  check(got[0]?.source.includes('{name: "tp<b>", size: 4}') && got[0]?.source.includes('^'), `bad recipe: no source line: ${got[0]?.source}`);
  check(bolds === 0, `bad recipe: the message's <b> became an element`);
  check(log.errors.length === 0, `bad recipe: console: ${log.errors.join('; ')}`);
  await lint(page, 'bad recipe');
  await page.close();
}

// Reshard: the heatmap's cells against the listing of `reshard --format json`, grouped here.
{
  const args = ['plans/torchtitan-llama3-8b.model.yaml', 'plans/torchtitan-llama3-8b-fsdp.recipe.yaml',
                'plans/torchtitan-llama3-8b.model.yaml', 'plans/torchtitan-llama3-8b-fsdp-tp.recipe.yaml'];
  const html = path.join(work, 'reshard.html');
  run(['report', '--reshard', ...args, '-o', html, '--ranks-per-node', '8']);
  const listing = JSON.parse(run(['reshard', ...args, '--format', 'json', '--ranks-per-node', '8']));
  const want = new Map();
  for (const r of listing.ranks) {
    for (const p of r.params) {
      for (const rd of p.reads) {
        if (rd.src === r.rank) continue;
        const key = `${Math.floor(r.rank / 8)}/${Math.floor(rd.src / 8)}`;
        want.set(key, (want.get(key) ?? 0) + rd.bytes);
      }
    }
  }
  const { page, log } = await open(html);
  const got = await page.evaluate(() => ({
    cells: [...document.querySelectorAll('rect.heat')].map((c) => [`${c.dataset.dst}/${c.dataset.src}`, +c.dataset.bytes]),
    moved: +document.getElementById('moved-bytes').dataset.bytes,
    inPlace: +document.getElementById('in-place-bytes').dataset.bytes,
  }));
  check(got.cells.length === 64, `reshard: ${got.cells.length} heatmap cells, expected 8 x 8 nodes`);
  let sum = 0;
  for (const [key, v] of got.cells) {
    sum += v;
    check(v === (want.get(key) ?? 0), `reshard: cell ${key}: page ${v}, listing ${want.get(key) ?? 0}`);
  }
  check(sum === listing.totals.moved_bytes && got.moved === listing.totals.moved_bytes, `reshard: heatmap sums to ${sum}, moved ${got.moved}, listing ${listing.totals.moved_bytes}`);
  check(got.inPlace === listing.totals.in_place_bytes, `reshard: in place ${got.inPlace} vs ${listing.totals.in_place_bytes}`);
  check(log.errors.length === 0, `reshard: console: ${log.errors.join('; ')}`);
  await screenshotCheck(page, 'reshard');
  await lint(page, 'reshard');
  await page.close();
}

// A compiled OUTDIR's page: the same memory figures as `memory --format json` (and so as the
// MODEL RECIPE page), read from its rank files; rank selection; plan.json's world summary.
{
  const model = 'plans/megatron-llama-3-70b.model.yaml';
  const recipe = 'plans/megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml';
  const out = path.join(work, 'outdir-megatron');
  run(['compile', model, recipe, '-o', out]);
  const html = path.join(work, 'outdir.html');
  run(['report', out, '-o', html]);
  const rank = 300;
  const mem = JSON.parse(run(['memory', model, recipe, '--format', 'json', '--ranks', `${rank}`]));
  const { page, log } = await open(html);
  check(log.errors.length === 0, `outdir: console: ${log.errors.join('; ')}`);
  check(log.requests.every((u) => u === 'file://' + html), `outdir: requests beyond the file`);
  const dom = await page.evaluate(() => {
    const out = { world: document.getElementById('world')?.textContent, stages: {}, summary: {} };
    document.querySelectorAll('#memory-table td[data-bytes]').forEach((td) => {
      out.stages[`${td.dataset.stage}/${td.dataset.kind}/${td.dataset.stat}`] = td.dataset.bytes;
    });
    document.querySelectorAll('#plan-memory td[data-bytes]').forEach((td) => {
      out.summary[`${td.dataset.kind}/${td.dataset.stat}`] = +td.dataset.bytes;
    });
    const peak = document.getElementById('peak');
    out.peak = { bytes: peak?.dataset.bytes, ranks: peak?.dataset.ranks };
    out.notes = [...document.querySelectorAll('#notes li')].map((li) => li.textContent);
    return out;
  });
  check(dom.world === `${mem.world_size} ranks`, `outdir: world '${dom.world}' vs ${mem.world_size}`);
  let compared = 0;
  for (const s of mem.stages) {
    for (const [kind, st] of Object.entries(s)) {
      if (kind === 'stage' || kind === 'num_ranks' || typeof st !== 'object') continue;
      for (const stat of ['min', 'median', 'max']) {
        check(dom.stages[`${s.stage}/${kind}/${stat}`] === String(st[stat]), `outdir: stage ${s.stage} ${kind} ${stat}: page ${dom.stages[`${s.stage}/${kind}/${stat}`]}, memory json ${st[stat]}`);
        compared++;
      }
    }
  }
  check(compared > 0 && compared === Object.keys(dom.stages).length, `outdir: ${compared} memory figures compared, the page has ${Object.keys(dom.stages).length}`);
  check(dom.peak.bytes === String(mem.peak.bytes) && dom.peak.ranks === mem.peak.ranks, `outdir: peak ${JSON.stringify(dom.peak)} vs ${mem.peak.bytes} on ${mem.peak.ranks}`);
  for (const kind of ['params', 'grads', 'optimizer_state', 'total']) {
    const lo = Math.min(...mem.stages.map((s) => s[kind].min));
    const hi = Math.max(...mem.stages.map((s) => s[kind].max));
    check(dom.summary[`${kind}/min`] === lo && dom.summary[`${kind}/max`] === hi, `outdir: plan.json summary ${kind} ${dom.summary[`${kind}/min`]}..${dom.summary[`${kind}/max`]} vs memory json ${lo}..${hi}`);
  }
  check(dom.notes.some((n) => n.includes('no source lines')), `outdir: the page does not say the OUTDIR holds no source lines: ${dom.notes}`);
  await page.fill('#rank-input', String(rank));
  await page.dispatchEvent('#rank-input', 'change');
  const sel = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#rank-memory td[data-kind]')].map((td) => [td.dataset.kind, td.dataset.bytes])));
  for (const [kind, v] of Object.entries(mem.ranks[0].bytes)) {
    check(sel[kind] === String(v), `outdir: rank ${rank} ${kind}: page ${sel[kind]}, memory json ${v}`);
  }
  await page.evaluate(() => window.scrollTo(0, 0));
  const shot = await screenshotCheck(page, 'outdir');
  const passes = await lint(page, 'outdir');
  figures.push({ name: 'outdir megatron-llama-3-70b', what: 'OUTDIR', ranks: mem.world_size, kib: Math.round(fs.statSync(html).size / 1024), loadMs: Math.round(log.loadMs), wallMs: log.wallMs, compared, axePasses: passes, ink: shot.ink.toFixed(2) });
  await page.close();
}

// A search page: the ranked rows, each layout's step bar and the pruned counts are the
// `search --format json` document's.
{
  const html = path.join(work, 'search.html');
  const args = ['search', 'plans/llama-3.1-8b.model.yaml', '--world', '64', '--hardware', 'h100',
                '--seq-len', '8192', '--global-batch-tokens', String(8192 * 256), '--budget', '80GB'];
  const doc = JSON.parse(run([...args, '--format', 'json', '--report', html]));
  const { page, log } = await open(html);
  check(log.errors.length === 0, `search: console: ${log.errors.join('; ')}`);
  const dom = await page.evaluate(() => ({
    rows: [...document.querySelectorAll('#ranked-table tr.layout')].map((tr) => ({ layout: tr.dataset.layout, peak: +tr.dataset.peak, headroom: +tr.dataset.headroom, step: +tr.dataset.step })),
    bars: [...document.querySelectorAll('#terms-chart g.step-bar')].map((g) => Object.fromEntries([...g.querySelectorAll('rect.term')].map((r) => [r.dataset.term, +r.dataset.seconds]))),
    pruned: Object.fromEntries([...document.querySelectorAll('#pruned-table td[data-reason]')].map((td) => [td.dataset.reason, +td.dataset.count])),
    budget: +document.getElementById('budget').dataset.bytes,
  }));
  const near = (a, b) => Math.abs(a - b) <= 1e-5 * Math.max(Math.abs(b), 1e-9);
  check(dom.rows.length === doc.ranked.length && dom.rows.length > 0, `search: ${dom.rows.length} rows, JSON ${doc.ranked.length}`);
  doc.ranked.forEach((want, i) => {
    const row = dom.rows[i] ?? {};
    check(row.layout === want.layout && row.peak === want.peak_bytes && row.headroom === want.headroom_bytes && near(row.step, want.step_seconds),
          `search: row ${i + 1} ${JSON.stringify(row)} vs ${want.layout} ${want.peak_bytes} ${want.headroom_bytes} ${want.step_seconds}`);
    const bar = dom.bars[i] ?? {};
    const expect = { compute: want.compute_seconds, recompute: want.recompute_seconds, imbalance: want.imbalance_seconds, bubble: want.bubble_seconds, optimizer: want.optimizer_seconds };
    for (const c of want.comm) expect[`comm ${c.axis}`] = c.exposed_seconds;
    check(Object.keys(bar).length === Object.keys(expect).length && Object.entries(expect).every(([k, v]) => near(bar[k], v)),
          `search: step bar ${i + 1} ${JSON.stringify(bar)} vs ${JSON.stringify(expect)}`);
  });
  check(JSON.stringify(dom.pruned) === JSON.stringify(doc.pruned), `search: pruned ${JSON.stringify(dom.pruned)} vs ${JSON.stringify(doc.pruned)}`);
  check(dom.budget === doc.budget_bytes, `search: budget ${dom.budget} vs ${doc.budget_bytes}`);
  await screenshotCheck(page, 'search');
  await lint(page, 'search');
  await page.close();
}

await context.close();
fs.rmSync(userDataDir, { recursive: true, force: true });
console.log('page                                   ranks   size KiB  load ms  wall ms  figures  axe passes');
for (const f of figures) {
  console.log(`${f.name.padEnd(38)} ${String(f.ranks).padStart(5)} ${String(f.kib).padStart(10)} ${String(f.loadMs).padStart(8)} ${String(f.wallMs).padStart(8)} ${String(f.compared).padStart(8)} ${String(f.axePasses).padStart(11)}`);
}
const big = figures.find((f) => f.ranks === 2048);
check(big && big.kib < 4096, `DeepSeek-V3 page: ${big?.kib} KiB, more than 4 MiB`);
if (!arg('--keep')) fs.rmSync(work, { recursive: true, force: true });
if (failures.length) {
  console.log(`browser test: ${failures.length} check(s) failed`);
  process.exit(1);
}
console.log('browser test: all checks passed');
