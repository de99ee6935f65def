/** The page served at `/`: a small, honest overview that reads the JSON API from the browser. */
export function dashboardHtml(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}code{background:#f4f4f4;padding:0 .3em}</style>
</head><body>
<h1>idem</h1>
<p>Event store server. API under <code>/v1</code>, metrics at <a href="/metrics">/metrics</a>, health at <a href="/health">/health</a>.
Protocol: see <code>docs/protocol.md</code>.</p>
<p id="head">Head position: …</p>
<h2>Consumers</h2>
<table><thead><tr><th>name</th><th>status</th><th>position</th><th>lag</th><th>parked</th><th>owner</th></tr></thead>
<tbody id="consumers"><tr><td colspan="6">loading…</td></tr></tbody></table>
<script>
async function load() {
  const tbody = document.getElementById('consumers');
  try {
    const h = await fetch('/health').then((r) => r.json());
    document.getElementById('head').textContent = 'Head position: ' + (h.store.head ?? '?') + ' — status: ' + h.status;
    const r = await fetch('/v1/consumers');
    if (!r.ok) { tbody.innerHTML = '<tr><td colspan="6">consumers: HTTP ' + r.status + ' (a token is needed)</td></tr>'; return; }
    const { consumers } = await r.json();
    tbody.replaceChildren(...consumers.map((c) => {
      const tr = document.createElement('tr');
      for (const v of [c.name, c.status, c.position, c.lag, c.parked, c.owner ?? '']) {
        const td = document.createElement('td'); td.textContent = String(v); tr.append(td);
      }
      return tr;
    }));
    if (consumers.length === 0) tbody.innerHTML = '<tr><td colspan="6">no consumers</td></tr>';
  } catch (e) { tbody.innerHTML = '<tr><td colspan="6">error: ' + String(e).replace(/</g, '&lt;') + '</td></tr>'; }
}
load(); setInterval(load, 5000);
</script>
</body></html>
`;
}
