// The dashboard page: polls the run's metrics and sessions and draws each
// chart as SVG (own code, no chart library, nothing from the network).
// Every series' polyline carries data-points (how many values) and
// data-last (the newest value, as in metrics.jsonl) for tests to check.
'use strict';

const CHARTS = [
  { id: 'reward', title: 'Reward', series: [['reward_mean', 'train (mean per step)', '#1f77b4'], ['eval_reward_mean', 'evaluation', '#d62728']] },
  { id: 'evaluation', title: 'Evaluation', series: [['eval_reward_mean', 'reward_mean', '#d62728'], ['eval_exact_fraction', 'exact_fraction', '#9467bd']] },
  { id: 'loss', title: 'Loss', series: [['loss', 'loss', '#2ca02c']] },
  { id: 'kl_clip', title: 'KL and clipping', series: [['algo_approx_kl', 'approx KL', '#8c564b'], ['algo_clip_fraction', 'clip fraction', '#e377c2']] },
  { id: 'staleness', title: 'Staleness (versions)', series: [['staleness_max', 'max', '#ff7f0e'], ['staleness_mean', 'mean', '#bcbd22']] },
  { id: 'samples', title: 'Throughput: samples/s', series: [['samples_per_second', 'samples/s', '#17becf']] },
  { id: 'tokens', title: 'Throughput: tokens/s', series: [['tokens_per_second', 'tokens/s', '#7f7f7f']] },
  { id: 'in_flight', title: 'Rollouts in flight', series: [['rollouts_in_flight', 'in flight', '#1f77b4']] },
];
const W = 420, H = 190, L = 58, R = 10, T = 8, B = 22;

const data = {};  // series key -> [[step, value], ...]
let offset = 0, live = true, lastStep = 0;

function fmt(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return '–';
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : Number(v.toPrecision(4)).toString();
}

function add(row) {
  const step = row.step;
  for (const [key, value] of Object.entries(row)) {
    if (typeof value !== 'number' || key === 'step') continue;
    (data[key] ??= []).push([step, value]);
  }
  if (!row.eval) lastStep = Math.max(lastStep, step);
}

function el(name, attrs = {}, text) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function draw(chart) {
  const box = document.getElementById(`chart-${chart.id}`);
  const svg = box.querySelector('svg');
  svg.replaceChildren();
  const series = chart.series.filter(([key]) => data[key]?.length);
  const legend = box.querySelector('.legend');
  legend.replaceChildren();
  if (!series.length) {
    svg.appendChild(el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, 'no data yet'));
    return;
  }
  const all = series.flatMap(([key]) => data[key]);
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(0, ...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 - y0 < 1e-12) y1 = y0 + 1;
  const px = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  svg.appendChild(el('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#888' }));
  svg.appendChild(el('line', { x1: L, y1: T, x2: L, y2: H - B, stroke: '#888' }));
  svg.appendChild(el('text', { x: L - 4, y: py(y1) + 4, 'text-anchor': 'end' }, fmt(y1)));
  svg.appendChild(el('text', { x: L - 4, y: py(y0) + 4, 'text-anchor': 'end' }, fmt(y0)));
  svg.appendChild(el('text', { x: L, y: H - 6, 'text-anchor': 'start' }, `step ${x0}`));
  svg.appendChild(el('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, `step ${x1}`));
  for (const [key, label, color] of series) {
    const pts = data[key];
    const last = pts[pts.length - 1][1];
    svg.appendChild(el('polyline', {
      fill: 'none', stroke: color, 'stroke-width': 1.6, 'data-series': key, 'data-points': pts.length, 'data-last': String(last),
      points: pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' '),
    }));
    if (pts.length < 30) for (const [x, y] of pts) svg.appendChild(el('circle', { cx: px(x), cy: py(y), r: 2.5, fill: color }));
    const item = document.createElement('span');
    item.dataset.key = key;
    item.dataset.value = String(last);
    item.innerHTML = `<i style="background:${color}"></i>${label}: <b>${fmt(last)}</b>`;
    legend.appendChild(item);
  }
}

function drawAll() {
  for (const c of CHARTS) draw(c);
  const last = (key) => data[key]?.[data[key].length - 1]?.[1];
  document.getElementById('latest-step').textContent = lastStep || '–';
  document.getElementById('latest-reward').textContent = fmt(last('reward_mean'));
  document.getElementById('latest-eval').textContent = fmt(last('eval_reward_mean'));
  document.getElementById('run-state').textContent = live ? 'live' : 'finished';
  document.body.dataset.steps = String(lastStep);
  document.body.dataset.live = String(live);
}

async function pollMetrics() {
  const r = await fetch(`api/metrics?offset=${offset}`);
  const body = await r.json();
  if (body.offset < offset) for (const k of Object.keys(data)) delete data[k];  // the file was rewritten
  offset = body.offset;
  for (const row of body.rows) add(row);
  live = body.live;
  drawAll();
}

async function pollSessions() {
  const body = await (await fetch('api/sessions?limit=12')).json();
  const tbody = document.querySelector('#sessions tbody');
  tbody.replaceChildren();
  for (const s of body.sessions) {
    const tr = document.createElement('tr');
    for (const [text, cls] of [[s.session_id, ''], [s.version, ''], [s.prompt, 'text'], [s.answer, 'text'], [fmt(s.reward), '']]) {
      const td = document.createElement('td');
      td.textContent = String(text);
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
  document.body.dataset.sessions = String(body.sessions.length);
}

async function main() {
  const run = await (await fetch('api/run')).json();
  document.getElementById('run-name').textContent = run.name;
  document.title = `areal · ${run.name}`;
  const charts = document.getElementById('charts');
  for (const c of CHARTS) {
    const box = document.createElement('div');
    box.className = 'chart';
    box.id = `chart-${c.id}`;
    box.innerHTML = `<h3>${c.title}</h3>`;
    box.appendChild(el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}` }));
    const legend = document.createElement('div');
    legend.className = 'legend';
    box.appendChild(legend);
    charts.appendChild(box);
  }
  for (;;) {
    try {
      await pollMetrics();
      await pollSessions();
    } catch (e) {
      document.getElementById('run-state').textContent = `unreachable (${e.message})`;
    }
    document.body.dataset.polled = String(Number(document.body.dataset.polled ?? 0) + 1);
    if (!live) break;  // finished: the last poll has everything
    await new Promise((r) => setTimeout(r, 1000));
  }
}

main();
