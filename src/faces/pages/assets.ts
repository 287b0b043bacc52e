// The admin pages' one stylesheet and one script, served from this origin (the pages'
// Content-Security-Policy allows no inline code). The pages work without the script; it
// adds the copy buttons, the confirmations before destructive forms and "tick all".
import { Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { CHART_STYLES } from "./charts.ts"
import { PATHS } from "./paths.ts"

export const SCRIPT = `"use strict";
(function () {
  function closest(target, selector) {
    return target instanceof Element ? target.closest(selector) : null;
  }
  document.querySelectorAll("button[data-copy], button[data-check-all]").forEach(function (b) { b.hidden = false; });
  document.addEventListener("click", function (event) {
    var copy = closest(event.target, "button[data-copy]");
    if (copy) {
      var source = document.getElementById(copy.getAttribute("data-copy"));
      var status = copy.parentElement && copy.parentElement.querySelector(".copy-status");
      var text = source ? source.textContent.trim() : "";
      var done = function (message) { if (status) status.textContent = message; };
      var select = function () {
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        done("Selected: press Ctrl+C (or Cmd+C) to copy.");
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done("Copied."); }, select);
      } else {
        select();
      }
      return;
    }
    var all = closest(event.target, "button[data-check-all]");
    if (all) {
      var group = document.getElementById(all.getAttribute("data-check-all"));
      if (!group) return;
      var boxes = Array.prototype.slice.call(group.querySelectorAll("input[type=checkbox]"));
      var every = boxes.every(function (x) { return x.checked; });
      boxes.forEach(function (x) { x.checked = !every; });
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var message = form instanceof HTMLFormElement ? form.getAttribute("data-confirm") : null;
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
`

export const STYLES = `:root {
  --ink: #1b1f24; --muted: #4d5661; --line: #c9ced6; --bg: #ffffff; --panel: #f4f6f8;
  --primary: #0b4f8a; --primary-ink: #ffffff; --danger: #a3161b; --ok: #135f2c; --focus: #c75b00;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg);
  line-height: 1.5;
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--primary); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; top: 0; background: var(--bg); padding: .5rem 1rem; }
.skip:focus { left: .5rem; z-index: 10; }
.top { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; padding: .75rem 1rem; background: var(--panel); border-bottom: 1px solid var(--line); }
.brand { font-weight: 700; }
.brand span { font-weight: 400; color: var(--muted); }
.top nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
.top nav a { display: inline-block; padding: .5rem .25rem; text-decoration: none; font-weight: 600; }
.top nav a[aria-current="page"] { border-bottom: 3px solid var(--primary); }
.who { margin-left: auto; display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; font-size: .95rem; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem; }
main.narrow { max-width: 34rem; }
main:focus { outline: none; }
h1 { font-size: 1.6rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.25rem; margin: 1.5rem 0 .75rem; }
.muted { color: var(--muted); }
section.card, form.card { border: 1px solid var(--line); border-radius: 6px; padding: 1rem; margin: 1rem 0; background: var(--bg); }
label { display: block; font-weight: 600; margin: .75rem 0 .25rem; }
input[type=text], input[type=url], input[type=password], select, textarea {
  width: 100%; max-width: 36rem; padding: .55rem .6rem; font: inherit; color: var(--ink);
  border: 1px solid #6b7480; border-radius: 4px; background: #fff;
}
fieldset { border: 1px solid var(--line); border-radius: 6px; margin: .75rem 0; padding: .5rem 1rem 1rem; }
legend { font-weight: 600; padding: 0 .25rem; }
.choices { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: .25rem 1rem; }
.choices label, label.check { display: flex; gap: .5rem; align-items: flex-start; font-weight: 400; margin: .25rem 0; }
.choices input, label.check input { margin-top: .3rem; width: 1.1rem; height: 1.1rem; flex: none; }
.hint { color: var(--muted); font-size: .92rem; margin: .25rem 0; }
button { font: inherit; cursor: pointer; border-radius: 4px; padding: .5rem .9rem; border: 1px solid transparent; min-height: 2.5rem; }
button.primary { background: var(--primary); color: var(--primary-ink); }
button.secondary { background: #fff; color: var(--primary); border-color: var(--primary); }
button.danger { background: var(--danger); color: #fff; }
button.link { background: none; border: none; color: var(--primary); text-decoration: underline; padding: .25rem; min-height: auto; }
form.inline { display: inline-block; margin: 0; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin-top: 1rem; }
.flash { border-radius: 6px; padding: .75rem 1rem; margin: 1rem 0; border: 2px solid; }
.flash p { margin: 0; }
.flash.success { border-color: var(--ok); background: #eaf6ee; }
.flash.error { border-color: var(--danger); background: #fbeaea; }
.flash.info { border-color: #4a6fa5; background: #eef3fb; }
.flash.warn { border-color: #a15c00; background: #fff6e5; }
.flash h2 { margin-top: 0; }
.form-error { color: var(--danger); font-weight: 600; border-left: 4px solid var(--danger); padding-left: .75rem; }
.once { border: 2px solid var(--primary); background: #eef4fa; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
.once h2 { margin-top: 0; }
.warning { margin: .25rem 0 .75rem; }
.secret-row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
code.secret { font-size: 1rem; padding: .5rem; background: #fff; border: 1px solid var(--line); border-radius: 4px; word-break: break-all; user-select: all; }
.copy-status { color: var(--ok); font-weight: 600; }
pre.answer { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: .9rem; }
dl.ping, dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: .75rem 0 0; }
dl.ping dt, dl.facts dt { font-weight: 600; }
dl.ping dd, dl.facts dd { margin: 0; word-break: break-word; }
.state { display: inline-block; padding: 0 .5rem; border-radius: 1rem; font-size: .85rem; font-weight: 600; border: 1px solid; }
.state.on, .state.active, .state.succeeded { color: var(--ok); }
.state.off, .state.revoked, .state.failed { color: var(--danger); }
.state.expired, .state.pending, .state.held, .state.cancelled { color: var(--muted); }
.state.failing, .state.running { color: #8a4b00; }
.state.finished { color: var(--ok); }
progress { width: 100%; max-width: 36rem; height: 1.25rem; }
table { width: 100%; border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { text-align: left; vertical-align: top; padding: .5rem; border-bottom: 1px solid var(--line); }
th { background: var(--panel); font-size: .92rem; }
td.num { text-align: right; }
.url { word-break: break-all; }
ul.details { list-style: none; margin: 0; padding: 0; font-size: .92rem; word-break: break-word; }
.filter { display: flex; flex-wrap: wrap; gap: .5rem; align-items: flex-end; }
.filter label { margin: 0; }
.filter select { width: auto; }
${CHART_STYLES}@media (max-width: 44rem) {
  .who { margin-left: 0; }
  table.stack thead { position: absolute; left: -9999px; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 .75rem; padding: .25rem .5rem; }
  table.stack caption { display: block; text-align: left; }
  table.stack td { border: none; padding: .25rem 0 .25rem 7.5rem; position: relative; min-height: 2rem; word-break: break-word; }
  table.stack td::before { content: attr(data-label); position: absolute; left: 0; top: .25rem; width: 7rem; font-weight: 600; color: var(--muted); }
  td.num { text-align: left; }
}
`

const ASSET_HEADERS = {
  "cache-control": "no-cache",
  "x-content-type-options": "nosniff",
  "cross-origin-resource-policy": "same-origin"
}

export const AssetRoutes = Layer.mergeAll(
  HttpRouter.add(
    "GET",
    PATHS.script,
    HttpServerResponse.text(SCRIPT, { contentType: "text/javascript; charset=utf-8", headers: ASSET_HEADERS })
  ),
  HttpRouter.add(
    "GET",
    PATHS.styles,
    HttpServerResponse.text(STYLES, { contentType: "text/css; charset=utf-8", headers: ASSET_HEADERS })
  )
)
