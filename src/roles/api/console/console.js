// stockd console: signs in with the admin token (kept in this variable only,
// never in storage or a URL), polls GET /v1/admin/overview once a second and
// renders it; actions call the existing admin routes after a confirmation.
"use strict";

(() => {
  const POLL_MS = 1000;
  const REQUEST_TIMEOUT_MS = 5000;
  const CHART_POINTS = 120; // two minutes at one poll a second
  const SERIES = [
    ["accepted", "Accepted", "#1a7f37"],
    ["sold_out", "Sold out", "#bc4c00"],
    ["limit", "Limit", "#8250df"],
    ["rate_limited", "Rate limited", "#0969da"],
    ["errors", "Errors", "#cf222e"],
  ];

  let token = null;
  let timer = null;
  let last = null; // latest overview
  let previous = null; // {t, counts} of the previous poll
  const samples = []; // [{accepted: r, ...}] rates, oldest first
  const rows = new Map(); // sku id -> {tr, cells}
  const fmt = new Intl.NumberFormat("en-US");
  const $ = (id) => document.getElementById(id);

  const num = (v) => (v === null || v === undefined ? "–" : fmt.format(v));
  const ms = (v) => (v === null || v === undefined ? "–" : v < 1000 ? `${fmt.format(Math.round(v))} ms` : `${(v / 1000).toFixed(1)} s`);
  const setText = (el, text) => { if (el.textContent !== text) el.textContent = text; };

  async function call(method, path, body) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
    const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    try {
      const r = await fetch(path, {
        method, headers, signal: ctl.signal, cache: "no-store", credentials: "omit",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      let json = null;
      try { json = await r.json(); } catch (_) { /* empty or not JSON */ }
      return { status: r.status, json };
    } finally {
      clearTimeout(t);
    }
  }

  const problem = (res) => (res.json && (res.json.detail || res.json.code)) || `HTTP ${res.status}`;

  // ---- sign-in ---------------------------------------------------------------

  async function signIn(ev) {
    ev.preventDefault();
    const input = $("token");
    token = input.value;
    input.value = "";
    setText($("signin-error"), "");
    let res;
    try {
      res = await call("GET", "/v1/admin/overview");
    } catch (e) {
      token = null;
      setText($("signin-error"), `Could not reach stockd: ${e.message}`);
      return;
    }
    if (res.status === 401) {
      token = null;
      setText($("signin-error"), "Token refused (401): check admin.token.");
      input.focus();
      return;
    }
    if (res.status !== 200) {
      token = null;
      setText($("signin-error"), `Sign-in failed: ${problem(res)}`);
      return;
    }
    $("signin-section").hidden = true;
    $("dashboard").hidden = false;
    $("signout").hidden = false;
    render(res.json);
    schedule();
    $("main").focus();
  }

  function signOut(message) {
    token = null;
    clearTimeout(timer);
    timer = null;
    previous = null;
    samples.length = 0;
    $("dashboard").hidden = true;
    $("signout").hidden = true;
    $("signin-section").hidden = false;
    setText($("status"), "Signed out");
    setText($("conn"), "");
    setText($("signin-error"), message || "");
    $("token").focus();
  }

  // ---- polling ---------------------------------------------------------------

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, POLL_MS);
  }

  async function poll() {
    if (token === null) return;
    try {
      const res = await call("GET", "/v1/admin/overview");
      if (res.status === 401) { signOut("The token was refused; sign in again."); return; }
      if (res.status === 200) {
        render(res.json);
        setText($("conn"), "");
      } else {
        setText($("conn"), `Overview failed: ${problem(res)} (retrying)`);
      }
    } catch (e) {
      setText($("conn"), `Connection lost: ${e.message} (retrying)`);
    }
    if (token !== null) schedule();
  }

  // ---- rendering -------------------------------------------------------------

  function render(o) {
    last = o;
    const at = new Date(o.generated_at_ms);
    setText($("status"), `Live · updated ${at.toLocaleTimeString("en-GB")} · served by ${o.node}`);
    renderHealth(o);
    renderRates(o);
    renderPipeline(o.pipeline);
    renderOrders(o.orders);
    renderSkus(o);
  }

  function badge(text, kind) {
    const li = document.createElement("li");
    const span = document.createElement("span");
    span.className = `badge ${kind}`;
    span.textContent = text;
    li.appendChild(span);
    return li;
  }

  function renderHealth(o) {
    const h = o.health;
    const items = [
      badge(`Redis ${h.redis ? "up" : "down"}`, h.redis ? "ok" : "bad"),
      badge(`MySQL ${h.mysql ? "up" : "down"}`, h.mysql ? "ok" : "bad"),
      badge(`Broker ${h.broker ? "up" : "down"}`, h.broker ? "ok" : "bad"),
      badge(`MySQL breaker ${h.mysql_breaker_open ? "open" : "closed"}`, h.mysql_breaker_open ? "bad" : "ok"),
    ];
    const key = JSON.stringify(h);
    const list = $("health");
    if (list.dataset.key !== key) { list.replaceChildren(...items); list.dataset.key = key; }
    setText($("nodes-count"), String(o.nodes.length));
    const nodes = o.nodes.map((n) => `${n.name} · ${ms(n.age_ms)} ago`);
    const ul = $("nodes");
    const nodesKey = o.nodes.map((n) => n.name).join(",");
    if (ul.dataset.key !== nodesKey) {
      ul.replaceChildren(...nodes.map(() => document.createElement("li")));
      ul.dataset.key = nodesKey;
    }
    [...ul.children].forEach((li, i) => setText(li, nodes[i]));
  }

  function renderRates(o) {
    const now = o.generated_at_ms;
    const counts = o.reservations;
    if (previous && now > previous.t) {
      const dt = (now - previous.t) / 1000;
      const rate = {};
      for (const [k] of SERIES) rate[k] = Math.max(0, (counts[k] - previous.counts[k]) / dt);
      samples.push(rate);
      while (samples.length > CHART_POINTS) samples.shift();
    }
    if (!previous || now > previous.t) previous = { t: now, counts };
    const dl = $("rates");
    if (!dl.children.length) {
      for (const [k, label, color] of SERIES) {
        const div = document.createElement("div");
        const dt = document.createElement("dt");
        const sw = document.createElement("span");
        sw.className = "swatch";
        sw.style.background = color;
        dt.append(sw, label);
        const dd = document.createElement("dd");
        dd.id = `rate-${k}`;
        div.append(dt, dd);
        dl.appendChild(div);
      }
    }
    const latest = samples[samples.length - 1];
    for (const [k] of SERIES) setText($(`rate-${k}`), latest ? latest[k].toFixed(1) : "–");
    drawChart();
  }

  function drawChart() {
    const svg = $("chart");
    const W = 600, H = 150, PAD = 4;
    const max = Math.max(1, ...samples.flatMap((s) => SERIES.map(([k]) => s[k])));
    const ns = "http://www.w3.org/2000/svg";
    const parts = [];
    setText($("chart-max"), `${max.toFixed(1)}/s`);
    for (const [k, , color] of SERIES) {
      if (samples.length < 2) break;
      const step = (W - 2 * PAD) / (CHART_POINTS - 1);
      const x0 = W - PAD - (samples.length - 1) * step;
      const points = samples.map((s, i) =>
        `${(x0 + i * step).toFixed(1)},${(H - PAD - (s[k] / max) * (H - 2 * PAD - 14)).toFixed(1)}`);
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", points.join(" "));
      line.setAttribute("fill", "none");
      line.setAttribute("stroke", color);
      line.setAttribute("stroke-width", "2");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      parts.push(line);
    }
    svg.replaceChildren(...parts);
  }

  // A definition list of `items` ([id, label, value]) in `dl`, each value in
  // the dd `${prefix}-${id}`; built once, then only the values change.
  function renderStats(dl, prefix, items) {
    if (!dl.children.length) {
      for (const [id, label] of items) {
        const div = document.createElement("div");
        const dt = document.createElement("dt");
        dt.textContent = label;
        const dd = document.createElement("dd");
        dd.id = `${prefix}-${id}`;
        div.append(dt, dd);
        dl.appendChild(div);
      }
    }
    for (const [id, , value] of items) setText($(`${prefix}-${id}`), value);
  }

  // `null` when MySQL did not answer: every count shows "–".
  function renderOrders(counts) {
    const c = counts || {};
    renderStats($("orders"), "orders", [
      ["reserved", "Reserved", num(c.reserved)],
      ["confirmed", "Confirmed", num(c.confirmed)],
      ["released", "Released", num(c.released)],
      ["rejected", "Rejected", num(c.rejected)],
    ]);
  }

  function renderPipeline(p) {
    const items = [
      ["outbox", "Outbox entries", num(p.outbox_entries)],
      ["outbox-age", "Oldest outbox entry", ms(p.outbox_oldest_age_ms)],
      ["queue", "Queue depth", num(p.queue_depth)],
      ["retry", "Retry queue", num(p.retry_depth)],
      ["dlq", "Dead-lettered", num(p.dlq_count)],
      ["consumers", "Consumers", num(p.consumers)],
      ["lag", "Persist lag p99", ms(p.persist_lag_p99_ms)],
      ["batch", "Consumer batch", p.consumer_batch_size === null ? "–" : p.consumer_batch_size.toFixed(1)],
    ];
    renderStats($("pipeline"), "pipe", items);
    const dlq = $("pipe-dlq");
    dlq.classList.toggle("bad-text", (p.dlq_count || 0) > 0);
  }

  const COLUMNS = ["total", "redis", "mysql", "reserved", "confirmed", "released", "badge", "sale", "verdict", "drift", "actions"];

  // Each cell carries its column's header as data-label: at phone width the
  // rows are cards and show it before the value (console.css).
  const LABELS = [...document.querySelectorAll("#skus thead th")].map((th) => th.textContent);
  // Cards are not display: table: say the table's roles outright, or a browser
  // may drop them (the rows' roles are set in skuRow).
  $("skus").setAttribute("role", "table");
  for (const e of document.querySelectorAll("#skus thead, #skus tbody")) e.setAttribute("role", "rowgroup");
  for (const e of document.querySelectorAll("#skus thead tr")) e.setAttribute("role", "row");
  for (const e of document.querySelectorAll("#skus thead th")) e.setAttribute("role", "columnheader");

  function skuRow(id) {
    let row = rows.get(id);
    if (row) return row;
    const tr = document.createElement("tr");
    tr.setAttribute("role", "row");
    const th = document.createElement("th");
    th.scope = "row";
    th.setAttribute("role", "rowheader");
    th.dataset.label = LABELS[0];
    th.textContent = String(id);
    tr.appendChild(th);
    const cells = {};
    for (const [i, c] of COLUMNS.entries()) {
      const td = document.createElement("td");
      td.id = `sku-${id}-${c}`;
      td.dataset.col = c;
      td.setAttribute("role", "cell");
      td.dataset.label = LABELS[i + 1];
      if (!["badge", "sale", "verdict", "actions"].includes(c)) td.className = "n";
      tr.appendChild(td);
      cells[c] = td;
    }
    const restock = document.createElement("button");
    restock.type = "button";
    restock.id = `sku-${id}-restock`;
    restock.textContent = "Restock";
    restock.setAttribute("aria-label", `Restock SKU ${id}`);
    restock.addEventListener("click", () => prefillRestock(id));
    const warm = document.createElement("button");
    warm.type = "button";
    warm.id = `sku-${id}-warmup`;
    warm.textContent = "Warm up";
    warm.setAttribute("aria-label", `Warm up SKU ${id}`);
    warm.addEventListener("click", () => warmup(id));
    cells.actions.append(restock, warm);
    row = { tr, cells, badgeKey: "" };
    rows.set(id, row);
    return row;
  }

  // The SKU's sale terms: its window (UTC) and whether a pass is required.
  function saleText(s) {
    const when = s.sale_opens_at === null && s.sale_closes_at === null ? "Always"
      : `${s.sale_opens_at || "–"} → ${s.sale_closes_at || "open-ended"}`;
    return s.requires_pass ? `${when} · pass required` : when;
  }

  function renderSkus(o) {
    const tbody = document.querySelector("#skus tbody");
    const verdicts = new Map((o.reconcile ? o.reconcile.skus : []).map((l) => [l.sku_id, l]));
    const seen = new Set();
    o.skus.forEach((s, i) => {
      const row = skuRow(s.sku_id);
      seen.add(s.sku_id);
      if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
      const c = row.cells;
      setText(c.total, num(s.total_stock));
      setText(c.redis, num(s.redis_available));
      setText(c.mysql, num(s.mysql_available));
      setText(c.reserved, num(s.reserved));
      setText(c.confirmed, num(s.confirmed));
      setText(c.released, num(s.released));
      const [text, kind] = s.redis_available === null ? ["Not loaded", "warn"]
        : s.sold_out ? ["Sold out", "bad"] : ["On sale", "ok"];
      if (row.badgeKey !== text) {
        const span = document.createElement("span");
        span.className = `badge ${kind}`;
        span.textContent = text;
        c.badge.replaceChildren(span);
        row.badgeKey = text;
      }
      setText(c.sale, saleText(s));
      const v = verdicts.get(s.sku_id);
      setText(c.verdict, v ? v.verdict : "–");
      setText(c.drift, v ? num(v.drift) : "–");
    });
    for (const [id, row] of rows) {
      if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
    }
    $("skus-empty").hidden = o.skus.length > 0;
    $("skus-more").hidden = !o.skus_truncated;
    setText($("reconcile-at"), o.reconcile
      ? `Reconcile verdicts from the check at ${o.reconcile.checked_at}.`
      : "No reconcile check has run in this process yet.");
  }

  // ---- actions ---------------------------------------------------------------

  function confirmAction(text) {
    const dialog = $("confirm");
    setText($("confirm-text"), text);
    return new Promise((resolve) => {
      const done = (ok) => {
        $("confirm-ok").onclick = null;
        $("confirm-cancel").onclick = null;
        dialog.onclose = null;
        if (dialog.open) dialog.close();
        resolve(ok);
      };
      $("confirm-ok").onclick = () => done(true);
      $("confirm-cancel").onclick = () => done(false);
      dialog.onclose = () => done(false); // Escape
      dialog.showModal();
      $("confirm-cancel").focus();
    });
  }

  function result(text, ok) {
    const p = $("action-result");
    p.className = ok ? "ok" : "bad";
    p.textContent = text;
  }

  async function act(method, path, body, describe) {
    let res;
    try {
      res = await call(method, path, body);
    } catch (e) {
      result(`Failed: could not reach stockd (${e.message}).`, false);
      return;
    }
    if (res.status === 401) { signOut("The token was refused; sign in again."); return; }
    if (res.status >= 200 && res.status < 300) result(describe(res.json), true);
    else result(`Refused (${res.status}): ${problem(res)}`, false);
    poll();
  }

  function prefillRestock(id) {
    const s = last && last.skus.find((x) => x.sku_id === id);
    $("restock-sku").value = String(id);
    if (s) {
      $("restock-total").value = String(s.total_stock);
      $("restock-limit").value = String(s.limit_per_user);
    }
    $("restock-total").focus();
  }

  async function restock(ev) {
    ev.preventDefault();
    const id = Number($("restock-sku").value);
    const total = Number($("restock-total").value);
    const limit = Number($("restock-limit").value);
    if (!Number.isSafeInteger(id) || id < 1 || !Number.isSafeInteger(total) || total < 0
        || !Number.isSafeInteger(limit) || limit < 1 || limit > 1000000) {
      result("Refused: SKU id ≥ 1, total ≥ 0 and a limit of 1 to 1,000,000 are needed.", false);
      return;
    }
    const s = last && last.skus.find((x) => x.sku_id === id);
    if (s && total < s.total_stock - s.mysql_available) {
      result(`Refused: SKU ${id} already has ${fmt.format(s.total_stock - s.mysql_available)} units reserved or sold; the total cannot go below that.`, false);
      return;
    }
    if (s && limit === s.limit_per_user) {
      // Stock only: an adjustment by the difference, which keeps every
      // reservation made meanwhile (a PUT would set the total).
      const delta = total - s.total_stock;
      if (delta === 0) { result(`Nothing to do: SKU ${id} already has ${fmt.format(total)} units in total.`, false); return; }
      const signed = `${delta > 0 ? "+" : "−"}${fmt.format(Math.abs(delta))}`;
      if (!await confirmAction(`Adjust SKU ${id} by ${signed} units (total ${fmt.format(s.total_stock)} → ${fmt.format(total)})? Buyers see the change at once; reservations made meanwhile are kept.`)) return;
      const body = {
        delta, reason: "restock from the console",
        adjustment_id: `console-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`,
      };
      await act("POST", `/v1/admin/skus/${id}/adjustments`, body,
        (j) => `SKU ${id} adjusted by ${signed}: total ${fmt.format(j.total_after)}, ${fmt.format(j.available_after)} available in MySQL.`);
      return;
    }
    const what = s ? `Set SKU ${id}'s total stock from ${fmt.format(s.total_stock)} to ${fmt.format(total)}`
      : `Create SKU ${id} with ${fmt.format(total)} units`;
    if (!await confirmAction(`${what}, limit ${fmt.format(limit)} per buyer? Buyers see the change at once.`)) return;
    await act("PUT", `/v1/admin/skus/${id}`, { total_stock: total, limit_per_user: limit },
      (j) => `SKU ${id} stored: total ${fmt.format(j.total_stock)}, ${fmt.format(j.available)} available.`);
  }

  async function warmup(id) {
    if (!await confirmAction(`Warm up SKU ${id}: reload its stock from MySQL into Redis? Refused while deductions are in flight.`)) return;
    await act("POST", `/v1/admin/skus/${id}/warmup`, undefined,
      (j) => `Warm-up of SKU ${id} done: ${fmt.format(j.available)} available in Redis.`);
  }

  async function reconcile() {
    if (!await confirmAction("Run a reconcile check of every SKU now? It repairs drift only when the server's reconcile.repair is on.")) return;
    await act("POST", "/v1/admin/reconcile", undefined, (j) => {
      const bad = j.skus.filter((l) => l.verdict !== "OK" && l.verdict !== "IN_FLIGHT").length;
      return `Reconcile check done: ${j.skus.length} SKUs, ${bad} not OK.`;
    });
  }

  async function replay() {
    const dead = last ? last.pipeline.dlq_count : null;
    if (dead === 0) { result("Nothing to replay: the dead-letter queues are empty.", false); return; }
    if (!await confirmAction(`Replay ${dead === null ? "the" : fmt.format(dead)} dead-lettered message(s) of the deduct DLQ to the work queue? Safe to repeat: applied deductions are skipped.`)) return;
    await act("POST", "/v1/admin/dlq/replay", undefined,
      (j) => `DLQ replay done: ${fmt.format(j.replayed)} deductions replayed.`);
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("signin").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => signOut(""));
    $("restock").addEventListener("submit", restock);
    $("reconcile").addEventListener("click", reconcile);
    $("replay").addEventListener("click", replay);
    $("token").focus();
  });
})();
