import type * as Echarts from 'echarts';
import { decimalOf } from '../core/money';
// Server-rendered HTML shared by the pages this service serves (the operator
// dashboard, the sandbox checkout and portal): escaping, money, a page shell, and an
// inline SVG chart. Presentation only: no rule, no data access.

// ECharts (about 16 MB of a process's memory) loads with the first chart drawn, not at
// start: a process that never serves a dashboard chart never holds it.
let echartsModule: typeof Echarts | undefined;
const echarts = (): typeof Echarts => (echartsModule ??= require('echarts') as typeof Echarts);

export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Marks a string as already-escaped HTML for html`` templates. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string { return this.value; }
}

export const raw = (value: string): Html => new Html(value);

/** Tagged template: interpolated values are escaped unless they are Html (arrays are joined). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  values.forEach((v, i) => {
    const render = (x: unknown): string => (x instanceof Html ? x.value : Array.isArray(x) ? x.map(render).join('') : x === null || x === undefined || x === false ? '' : esc(x));
    out += render(v) + strings[i + 1];
  });
  return new Html(out);
}

/** Minor units with their currency, in the currency's own decimal places ("12.50 USD", "500 JPY"). */
export function money(cents: number | null | undefined, currency: string | null | undefined): string {
  if (cents === null || cents === undefined) return '—';
  const sign = cents < 0 ? '−' : '';
  return `${sign}${decimalOf(Math.abs(cents), currency)} ${(currency ?? '').toUpperCase()}`.trim();
}

export function day(ts: string | null | undefined): string {
  return ts ? ts.slice(0, 10) : '—';
}

export const BASE_CSS = `
*{box-sizing:border-box}.skip{position:absolute;left:-9999px}.skip:focus{left:.5rem;top:.5rem;background:#fff;padding:.4rem;z-index:10}body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#f6f7f9;line-height:1.45}
a{color:#0b57d0}a:focus,button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #f4b400;outline-offset:2px}
header.top{background:#1f2937;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
header.top a{color:#fff}header.top .who{margin-left:auto;font-size:.9rem}
nav.main ul{list-style:none;margin:0;padding:0;display:flex;gap:.9rem;flex-wrap:wrap}nav.main a[aria-current]{font-weight:700;text-decoration:underline}
main{max-width:72rem;margin:1.2rem auto;padding:0 1.2rem}
h1{font-size:1.5rem;margin:.4rem 0 1rem}h2{font-size:1.15rem;margin:1.6rem 0 .6rem}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.92rem}th,td{text-align:left;padding:.45rem .6rem;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef0f3}code{font-size:.88em;background:#eef0f3;padding:.05rem .25rem;border-radius:3px;word-break:break-all}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(11rem,1fr));gap:.8rem}.card{background:#fff;border:1px solid #dfe3e8;border-radius:6px;padding:.8rem}
.card .n{font-size:1.5rem;font-weight:700}.card .l{color:#4a5360;font-size:.85rem}
.notice{background:#e6f4ea;border:1px solid #34a853;padding:.6rem .8rem;border-radius:4px}.error{background:#fce8e6;border:1px solid #d93025;padding:.6rem .8rem;border-radius:4px}
.secret{background:#fff8e1;border:1px solid #f4b400;padding:.8rem;border-radius:4px}
form.inline{display:inline}form.filters{display:flex;gap:.6rem;flex-wrap:wrap;align-items:end;margin:.6rem 0}
label{display:block;font-size:.85rem;color:#333}input,select,textarea{font:inherit;padding:.35rem .45rem;border:1px solid #8a939e;border-radius:4px}
button{font:inherit;padding:.4rem .9rem;border-radius:4px;border:1px solid #0b57d0;background:#0b57d0;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#0b57d0}button.danger{background:#b3261e;border-color:#b3261e}
.muted{color:#4a5360}.empty{background:#fff;border:1px dashed #b7bec7;padding:1rem;text-align:center;color:#4a5360}
.banner{background:#fff3cd;border-bottom:2px solid #c69500;padding:.5rem 1rem;text-align:center;font-weight:600}
fieldset{border:1px solid #dfe3e8;background:#fff;border-radius:6px;margin:.6rem 0}
.chart{background:#fff;border:1px solid #dfe3e8;border-radius:6px;padding:.6rem;margin:0}.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(24rem,1fr));gap:.8rem;margin-top:.8rem}.charts.report{grid-template-columns:minmax(0,40rem)}
figcaption{font-size:.85rem;color:#4a5360}dl.facts{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem}dl.facts dd{margin:0}
ul.tags{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:.3rem}ul.tags li{background:#eef0f3;border-radius:3px;padding:0 .35rem;font-size:.88em}.note{white-space:pre-wrap}
`;

export interface SeriesPoint { label: string; value: number }

/**
 * A line chart drawn by ECharts on the server (its SVG renderer without a DOM), sent as
 * inline SVG: no script runs in the page. An accessible image: its title and
 * description carry the figures, and the caption repeats them for every reader.
 */
export function lineChart(title: string, points: SeriesPoint[], format: (v: number) => string, axis: (v: number) => string = String): Html {
  const w = 480, h = 180;
  const max = Math.max(0, ...points.map((p) => p.value));
  const first = points[0], last = points[points.length - 1];
  const desc = points.length ? `From ${first.label} (${format(first.value)}) to ${last.label} (${format(last.value)}); highest ${format(max)}.` : 'No data.';
  const chart = echarts().init(null, null, { renderer: 'svg', ssr: true, width: w, height: h });
  let svg: string;
  try {
    chart.setOption({
      animation: false,
      grid: { left: 16, right: 24, top: 16, bottom: 8, containLabel: true },
      // Day labels as MM-DD (the year is in the caption), months (YYYY-MM) whole, values
      // in the axis' own short form.
      xAxis: { type: 'category', data: points.map((p) => (p.label.length > 7 ? p.label.slice(5) : p.label)), boundaryGap: false,
        axisLabel: { color: '#4a5360', interval: Math.max(0, Math.ceil(points.length / 4) - 1) } },
      yAxis: { type: 'value', minInterval: 1, axisLabel: { color: '#4a5360', formatter: (v: number) => axis(v) } },
      series: [{ type: 'line', data: points.map((p) => p.value), showSymbol: false, lineStyle: { color: '#0b57d0', width: 2 } }],
    });
    svg = chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
  const id = title.replace(/\W+/g, '-');
  // The root element becomes the labelled image (ECharts writes the drawing only).
  const labelled = svg.replace(/^<svg /, `<svg role="img" aria-labelledby="${id}-t ${id}-d" width="100%" preserveAspectRatio="xMinYMid meet" `)
    .replace(/ width="480" height="180"/, '')
    .replace(/(<svg[^>]*>)/, `$1<title id="${id}-t">${esc(title)}</title><desc id="${id}-d">${esc(desc)}</desc>`);
  return html`<figure class="chart">${raw(labelled)}
<figcaption>${title}: ${desc}</figcaption></figure>`;
}
