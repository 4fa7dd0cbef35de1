/**
 * The console's one stylesheet, served at /console/static/console.css (the CSP allows styles from
 * our own origin only; no inline style anywhere). Kept in a module so `npm run build` ships it in
 * dist/ with the code. Plain, dense and legible: ops staff read these tables all day.
 */
export const CONSOLE_CSS =
  `
:root{--ink:#1d2330;--muted:#5a6478;--line:#d5d9e0;--soft:#f3f5f8;--accent:#1f4e8c;--ok-bg:#e3f4e8;--ok:#1e6b36;` +
  `--bad-bg:#fbe3e1;--bad:#8a1f14;--warn-bg:#fff4d6;--warn:#7a5a00}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe ` +
  `UI",Roboto,Arial,sans-serif;color:var(--ink);margin:0;background:#fff}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:24px;background:#17325c;color:#fff;padding:0 20px;height:48px}
header.top .brand{font-weight:700;letter-spacing:.2px;white-space:nowrap}
header.top nav{display:flex;gap:4px;flex:1}
header.top nav a{color:#d8e2f3;padding:6px 10px;border-radius:4px}
header.top nav a.here{background:#2c4f86;color:#fff}
header.top nav a:hover{text-decoration:none;background:#244373}
header.top .who{display:flex;align-items:center;gap:10px;font-size:13px;color:#d8e2f3;white-space:nowrap}
header.top .who form{margin:0}
header.top .who button{background:transparent;border:1px solid #7f95bb;color:#fff;padding:3px 10px}
main{padding:18px 20px 40px;max-width:1400px}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid ` +
  `var(--line);padding-bottom:4px}
h3{font-size:14px;margin:16px 0 6px}
table{border-collapse:collapse;width:100%;margin:6px 0 10px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600;font-size:13px;white-space:nowrap;border-top:1px solid var(--line)}
tbody tr:hover{background:#f8f9fb}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.mono,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
td.wrap{word-break:break-word;max-width:520px}
.muted{color:var(--muted)}.small{font-size:12px}
.flash{padding:8px 12px;border-radius:4px;margin:0 0 14px;font-weight:500}
.flash.ok{background:var(--ok-bg);color:var(--ok)}.flash.error{background:var(--bad-bg);color:var(--bad)}
.pill{display:inline-block;padding:1px ` +
  `8px;border-radius:10px;font-size:12px;font-weight:600;background:var(--soft);color:var(--muted);` +
  `white-space:nowrap}
.pill.bad{background:var(--bad-bg);color:var(--bad)}.pill.ok{background:var(--ok-bg);color:var(--ok)}` +
  `.pill.warn{background:var(--warn-bg);color:var(--warn)}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:0 0 14px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 14px;min-width:170px;background:#fff}
.card .label{font-size:12px;color:var(--muted)}.card .value{font-size:18px;font-weight:600}
form{margin:0}
form.filters{display:flex;flex-wrap:wrap;gap:10px 14px;align-items:flex-end;background:var(--soft);border:1px ` +
  `solid var(--line);border-radius:6px;padding:10px 12px;margin:0 0 12px}
form.filters label,form.stack ` +
  `label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);gap:2px}
form.stack{display:flex;flex-direction:column;gap:10px;max-width:560px}
form.inline{display:inline-flex;gap:6px;align-items:center}
form.action{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-end;border:1px solid ` +
  `var(--line);border-radius:6px;padding:10px 12px;margin:0 0 10px}
form.action label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);gap:2px}
form.action .grow{flex:1;min-width:260px}
input,select,textarea{font:inherit;padding:4px 6px;border:1px solid ` +
  `#b8bfcc;border-radius:4px;background:#fff;color:var(--ink)}
input[type=number]{width:110px}input.short{width:120px}input.wide{width:100%}
button{font:inherit;padding:5px 12px;border-radius:4px;border:1px solid ` +
  `var(--accent);background:var(--accent);color:#fff;cursor:pointer;white-space:nowrap}
button.secondary{background:#fff;color:var(--accent)}
button.danger{background:#a5281b;border-color:#a5281b}
button:disabled{opacity:.5;cursor:not-allowed}
.pager{display:flex;gap:12px;align-items:center;margin:8px 0}
.kv{display:grid;grid-template-columns:200px 1fr;gap:3px 14px;margin:6px 0 10px}
.kv dt{color:var(--muted)}.kv dd{margin:0;word-break:break-word}
.diff td.old{color:var(--bad)}.diff td.new{color:var(--ok)}
pre{background:var(--soft);padding:8px;border-radius:4px;overflow:auto;max-height:320px;font-size:12px;` +
  `margin:4px 0}
.login{max-width:360px;margin:80px auto;border:1px solid var(--line);border-radius:8px;padding:24px}
.login h1{margin-bottom:16px}
.note{border-left:3px solid var(--line);padding:4px 10px;color:var(--muted);margin:6px 0 12px}
ul.issues{margin:0;padding-left:16px}ul.issues li{margin:2px 0}
td.date{white-space:nowrap}
table.narrow{width:auto;min-width:560px}
.badge{display:inline-block;min-width:18px;padding:0 ` +
  `5px;border-radius:9px;background:#e0a526;color:#1d2330;font-size:11px;font-weight:700;text-align:center;` +
  `margin-left:2px}
.sorted::after{content:" \\25BE";color:var(--muted)}
p.zone{margin:-8px 0 8px;text-align:right}
table.worklist{table-layout:fixed}
table.worklist td{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.worklist col.id{width:172px}table.worklist col.no{width:120px}table.worklist ` +
  `col.who{width:170px}table.worklist col.why{width:150px}
table.worklist col.amt{width:110px}table.worklist col.rel{width:96px}table.worklist col.age{width:76px}
`;

/**
 * The console's icon, inline (no file to ship, nothing fetched from elsewhere): served at
 * /console/static/favicon.svg and, for browsers that ask the root first, /favicon.ico.
 */
export const CONSOLE_FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">' +
  '<rect width="16" height="16" rx="3" fill="#1f4e79"/>' +
  '<path d="M4 8.5l2.5 2.5L12 5.5" fill="none" stroke="#fff" stroke-width="2" stroke-linecap="round"/></svg>';
