// The dashboard's stylesheet and script, served by the router before any session.
import type { Router } from 'express';
import { BASE_CSS } from '../web/html';

export function mountAssets(router: Router): void {
  router.get('/assets/dashboard.css', (_req, res) => { res.setHeader('Cache-Control', 'public, max-age=300'); res.type('css').send(BASE_CSS); });
  router.get('/assets/dashboard.js', (_req, res) => { res.setHeader('Cache-Control', 'public, max-age=300'); res.type('js').send(CLIENT_JS); });
}

/** Copy buttons (data-copy="element id"); the pages work without it. */
const CLIENT_JS = `document.addEventListener('click', function (e) {
  var b = e.target.closest && e.target.closest('button[data-copy]');
  if (!b) return;
  var el = document.getElementById(b.getAttribute('data-copy'));
  if (el && navigator.clipboard) navigator.clipboard.writeText(el.textContent).then(function () { b.textContent = 'Copied'; });
});`;
