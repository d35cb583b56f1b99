// invledger console: local times, the live feed and chart of a SKU page,
// the repair confirmation. Everything works without it except the live parts.
(function () {
  "use strict";

  // Times: the markup says UTC; show the browser's zone, keep UTC on hover.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) { t.textContent = d.toLocaleString(); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(document); });
  document.addEventListener("htmx:afterSwap", function (e) { localTimes(e.target); });

  function fmtTime(iso) {
    var t = document.createElement("time");
    var d = new Date(iso);
    t.setAttribute("datetime", iso);
    t.title = isNaN(d) ? iso : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    t.textContent = isNaN(d) ? iso : d.toLocaleString();
    return t;
  }

  // Reconciliation: a repair asks in a dialog first.
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("reconcile-form");
    var dialog = document.getElementById("repair-dialog");
    if (!form || !dialog || typeof dialog.showModal !== "function") { return; }
    form.addEventListener("submit", function (e) {
      if (!form.elements.repair.checked || form.elements.confirm.value === "yes") { return; }
      e.preventDefault();
      dialog.returnValue = "";
      dialog.showModal();
    });
    dialog.addEventListener("close", function () {
      if (dialog.returnValue === "repair") {
        form.elements.confirm.value = "yes";
        form.submit();
      }
    });
  });

  // SKU page: figures and events over Server-Sent Events, plotted with uPlot.
  document.addEventListener("DOMContentLoaded", function () {
    var live = document.getElementById("live");
    if (!live) { return; }
    var sku = live.dataset.sku;
    var status = document.getElementById("feed-status");
    var xs = [], stock = [], rate = [];
    var plot = null;
    var chartEl = document.getElementById("chart");
    function width() { return Math.max(260, Math.min(chartEl.clientWidth || 800, 1100)); }
    function draw() {
      if (typeof uPlot === "undefined") { return; }
      if (!plot) {
        plot = new uPlot({
          width: width(), height: 240,
          // The last five minutes, however few points there are yet.
          scales: { x: { time: true, range: function (u, min, max) { return [max - 300, max]; } }, rate: {} },
          series: [{}, { label: "Stock", stroke: "#0550ae", width: 2, scale: "y" },
                   { label: "Purchases/s", stroke: "#bf3989", width: 2, scale: "rate" }],
          axes: [{}, { scale: "y", label: "stock" }, { scale: "rate", side: 1, label: "per s", grid: { show: false } }]
        }, [xs, stock, rate], chartEl);
        window.addEventListener("resize", function () { plot.setSize({ width: width(), height: 240 }); });
      } else {
        plot.setData([xs, stock, rate]);
      }
    }
    function set(id, v) { var el = document.getElementById(id); if (el) { el.textContent = v; } }
    function figure(f) {
      xs.push(f.t); stock.push(f.stock); rate.push(f.purchases_per_s);
      while (xs.length > 300) { xs.shift(); stock.shift(); rate.shift(); }
      set("stock", f.stock === null ? "—" : f.stock);
      set("ledger-stock", f.ledger_stock === null ? "—" : f.ledger_stock);
      set("per-second", f.purchases_per_s);
      set("lag-events", f.lag_events);
      set("lag-seconds", f.lag_seconds.toFixed(1));
      set("state", f.state);
      var tb = document.querySelector("#refusals tbody");
      if (tb && f.refusals) {
        var keys = Object.keys(f.refusals).sort();
        tb.replaceChildren();
        keys.forEach(function (k) {
          var tr = document.createElement("tr");
          var a = document.createElement("td"); a.textContent = k;
          var b = document.createElement("td"); b.className = "n"; b.textContent = f.refusals[k];
          tr.append(a, b); tb.append(tr);
        });
        if (!keys.length) { var tr = document.createElement("tr"); var td = document.createElement("td"); td.colSpan = 2; td.textContent = "None."; tr.append(td); tb.append(tr); }
      }
    }
    var newest = document.querySelector("#newest tbody");
    function event(e) {
      var empty = newest.querySelector(".empty");
      if (empty) { empty.remove(); }
      var tr = document.createElement("tr");
      var cells = [fmtTime(e.occurred_at), e.seq, e.type, e.delta, e.balance_after, e.user_id || e.actor];
      cells.forEach(function (c, i) {
        var td = document.createElement("td");
        if (i === 1 || i === 3 || i === 4) { td.className = "n"; }
        td.append(c === undefined || c === null ? "" : c);
        tr.append(td);
      });
      newest.prepend(tr);
      while (newest.rows.length > 20) { newest.deleteRow(newest.rows.length - 1); }
    }
    var src = new EventSource("/console/skus/" + encodeURIComponent(sku) + "/feed");
    src.addEventListener("open", function () { status.textContent = "live"; });
    src.addEventListener("error", function () { status.textContent = "reconnecting…"; });
    src.addEventListener("history", function (m) { JSON.parse(m.data).forEach(figure); draw(); });
    src.addEventListener("figures", function (m) { figure(JSON.parse(m.data)); draw(); });
    src.addEventListener("event", function (m) { event(JSON.parse(m.data)); });
    src.addEventListener("signedout", function () { src.close(); status.textContent = "signed out"; window.location.assign("/console/signin"); });
  });
})();
