// The overview's charts (src/web/html.ts lineChart): drawn by ECharts on the server as
// inline SVG, an image labelled by its title and a description of the figures, with
// the line through every point and no script.
import { lineChart } from '../../src/web/html';

test('a line chart is a labelled SVG image of the points, without script', () => {
  const points = Array.from({ length: 30 }, (_, i) => ({ label: `2026-11-${String(i + 1).padStart(2, '0')}`, value: i === 29 ? 4200 : i * 10 }));
  const out = lineChart('MRR <USD>, last 30 days', points, (v) => `${v} c`).value;
  expect(out).toMatch(/^<figure class="chart"><svg role="img" aria-labelledby="MRR-USD-last-30-days-t MRR-USD-last-30-days-d"/);
  expect(out).toContain('<title id="MRR-USD-last-30-days-t">MRR &lt;USD&gt;, last 30 days</title>');
  expect(out).toContain('From 2026-11-01 (0 c) to 2026-11-30 (4200 c); highest 4200 c.');
  expect(out).not.toMatch(/<script/i);
  // One drawn line with a vertex per point (ECharts' path: a move, then a line to each next point).
  const line = [...out.matchAll(/<path d="(M[^"]+)"[^>]*stroke="#0b57d0"/g)].map((m) => m[1]);
  expect(line).toHaveLength(1);
  expect((line[0].match(/[ML]/g) ?? []).length).toBe(points.length);
  // The x axis names days as MM-DD.
  expect(out).toContain('11-01');
});

test('an empty series still draws an image that says so', () => {
  const out = lineChart('Cancels per day', [], String).value;
  expect(out).toContain('<desc id="Cancels-per-day-d">No data.</desc>');
  expect(out).toContain('</svg>');
});
