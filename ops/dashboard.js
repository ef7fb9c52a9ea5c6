(function () {
  "use strict";
  var tokenKey = "promlib.ops.token";
  var interval = 1000;
  var body = document.body;
  var tokenInput = document.getElementById("ops-token");
  var $ = function (id) { return document.getElementById(id); };

  var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(tokenKey, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search + "#/");
  }
  tokenInput.value = sessionStorage.getItem(tokenKey) || "";
  tokenInput.addEventListener("change", function () {
    sessionStorage.setItem(tokenKey, tokenInput.value.trim());
  });

  function request(method, path, payload) {
    var headers = { "Accept": "application/json" };
    var token = sessionStorage.getItem(tokenKey);
    if (token) {
      headers["Authorization"] = "Bearer " + token;
    }
    var init = { method: method, headers: headers, cache: "no-store" };
    if (payload) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    return fetch(path, init).then(function (res) {
      return res.json().then(function (b) {
        if (!res.ok) {
          throw new Error(path.split("?")[0] + ": " + ((b && b.error && b.error.msg) || ("HTTP " + res.status)));
        }
        return b;
      });
    });
  }
  function get(path) { return request("GET", path); }
  function q(v) { return encodeURIComponent(v); }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) {
      e.textContent = String(text);
    }
    return e;
  }
  function row(attrs, cells) {
    var tr = document.createElement("tr");
    Object.keys(attrs).forEach(function (k) { tr.dataset[k] = attrs[k]; });
    cells.forEach(function (c) {
      var td = document.createElement("td");
      td.dataset.field = c[0];
      if (c[1] instanceof Node) {
        td.appendChild(c[1]);
      } else {
        td.textContent = String(c[1]);
      }
      if (c[2]) {
        td.className = c[2];
      }
      tr.appendChild(td);
    });
    return tr;
  }
  function fill(id, rows) { var t = $(id); t.replaceChildren.apply(t, rows); }
  function info(id, pairs) {
    var dl = $(id), out = [];
    pairs.forEach(function (p) { out.push(el("dt", {}, p[0]), el("dd", { "data-field": p[2] || p[0] }, p[1])); });
    dl.replaceChildren.apply(dl, out);
  }
  function link(href, text) { return el("a", { href: href }, text); }
  function topicHref(t) { return "#/topic/" + q(t); }
  function groupHref(t, g) { return "#/group/" + q(t) + "/" + q(g); }
  function ago(ms) {
    var s = Math.round(ms / 1000);
    return s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : Math.round(s / 3600) + "h";
  }

  // The charts' history is kept by the hub (GET charts): the page loads
  // it whole when it opens, then asks for the points after the last one.
  var settings = { chart_window_ms: 15 * 60 * 1000, chart_groups: [], read_only: false };
  var hist = { now: 0, last: 0, topics: {}, groups: {} }; // topics: {t: {publish, deliver}}, groups: {"t/g": lag}

  function trim(pts, from) {
    var i = 0;
    while (i < pts.length && pts[i][0] < from) {
      i++;
    }
    return i ? pts.slice(i) : pts;
  }
  function merge(c) {
    var from = c.last_sample - settings.chart_window_ms;
    c.topics.forEach(function (t) {
      var h = hist.topics[t.topic] || { publish: [], deliver: [] };
      h.publish = trim(h.publish.concat(t.publish), from);
      h.deliver = trim(h.deliver.concat(t.deliver), from);
      hist.topics[t.topic] = h;
    });
    c.groups.forEach(function (g) {
      var k = g.topic + "/" + g.group;
      hist.groups[k] = trim((hist.groups[k] || []).concat(g.lag), from);
    });
    hist.last = Math.max(hist.last, c.last_sample);
    hist.now = hist.last;
  }
  function loadCharts() {
    return get("charts" + (hist.last ? "?since=" + hist.last : "")).then(merge);
  }

  // The namespace of SVG elements, from one the HTML parser made.
  var svgNS = $("svg-ns").namespaceURI;
  function chart(title, lines, key) {
    var box = el("div", { "class": "chart", "data-chart": key });
    box.appendChild(el("h4", {}, title));
    var svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("viewBox", "0 0 300 80");
    svg.setAttribute("preserveAspectRatio", "none");
    var now = hist.now, from = now - settings.chart_window_ms;
    var top = 1;
    lines.forEach(function (l) { l.pts.forEach(function (p) { top = Math.max(top, p[1]); }); });
    var legend = [];
    lines.forEach(function (l) {
      var path = document.createElementNS(svgNS, "polyline");
      path.setAttribute("class", l.cls);
      path.setAttribute("points", l.pts.map(function (p) {
        return (300 * (p[0] - from) / settings.chart_window_ms).toFixed(1) + "," + (78 - 76 * p[1] / top).toFixed(1);
      }).join(" "));
      svg.appendChild(path);
      var last = l.pts.length ? l.pts[l.pts.length - 1][1] : 0;
      legend.push(l.name + " " + (Math.round(last * 10) / 10));
    });
    box.appendChild(svg);
    box.appendChild(el("div", { "class": "legend" }, legend.join(" · ") + " (max " + (Math.round(top * 10) / 10) + ")"));
    return box;
  }

  function renderOverview(topics, inflight) {
    var trows = [], grows = [], rates = [], lags = [];
    var charted = settings.chart_groups.length ? settings.chart_groups : null;
    topics.topics.forEach(function (t) {
      var maxLag = 0;
      t.groups.forEach(function (g) {
        maxLag = Math.max(maxLag, g.lag);
        var here = g.local || { in_flight: 0, waiting: 0, buffered: 0, subscribers: 0 };
        var tr = row({ topic: t.topic, group: g.group }, [
          ["topic", link(topicHref(t.topic), t.topic)], ["group", link(groupHref(t.topic, g.group), g.group)],
          ["committed", g.committed], ["lag", g.lag], ["lag_ms", g.lag_ms], ["members", g.members.length],
          ["in_flight", here.in_flight], ["waiting", here.waiting], ["buffered", here.buffered], ["subscribers", here.subscribers]
        ]);
        if (g.lag > 0) {
          tr.className = "behind";
        }
        grows.push(tr);
        var k = t.topic + "/" + g.group;
        if (!charted || charted.indexOf(k) >= 0) {
          lags.push(chart(k, [{ name: "lag", cls: "lag", pts: hist.groups[k] || [] }], "lag:" + k));
        }
      });
      trows.push(row({ topic: t.topic }, [
        ["topic", link(topicHref(t.topic), t.topic)], ["events", t.events], ["head", t.head], ["groups", t.groups.length],
        ["in_flight", t.in_flight], ["lag", maxLag], ["dlq_pending", t.dlq ? t.dlq.pending : 0]
      ]));
      var h = hist.topics[t.topic] || { publish: [], deliver: [] };
      rates.push(chart(t.topic + " (events/s)", [
        { name: "publish", cls: "pub", pts: h.publish },
        { name: "deliver", cls: "del", pts: h.deliver }
      ], "rate:" + t.topic));
    });
    fill("topics-body", trows);
    fill("groups-body", grows);
    fill("rate-charts", rates);
    fill("lag-chart", lags);
    $("inflight-total").textContent = String(inflight.in_flight);
  }

  var route = { page: "overview" };
  function parseRoute() {
    var parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    if (parts[0] === "topic" && parts[1]) {
      return { page: "topic", topic: parts[1] };
    }
    if (parts[0] === "group" && parts[1] && parts[2]) {
      return { page: "group", topic: parts[1], group: parts[2] };
    }
    if (parts[0] === "connections") {
      return { page: "connections" };
    }
    return { page: "overview" };
  }
  function show() {
    route = parseRoute();
    body.dataset.page = route.page;
    ["overview", "topic", "group", "connections"].forEach(function (p) { $("page-" + p).hidden = p !== route.page; });
    $("cursor-confirm").hidden = true;
    $("dlq-confirm").hidden = true;
    eventsBefore = 0;
  }

  var eventsBefore = 0;
  function renderTopic(topics, events) {
    var t = topics.topics[0] || { groups: [] };
    $("topic-name").textContent = route.topic;
    info("topic-info", [["events", t.events], ["first seq", t.first_seq, "first_seq"], ["last seq", t.last_seq, "last_seq"],
      ["last event", t.last_ts ? new Date(t.last_ts).toISOString() : "-", "last_ts"], ["bytes", t.bytes < 0 ? "-" : t.bytes],
      ["dead letters pending", t.dlq ? t.dlq.pending : 0, "dlq_pending"]]);
    fill("topic-groups", t.groups.map(function (g) {
      var li = el("li", { "data-group": g.group });
      li.appendChild(link(groupHref(route.topic, g.group), g.group));
      li.appendChild(document.createTextNode(" lag " + g.lag));
      return li;
    }));
    fill("events-body", events.events.map(function (e) {
      return row({ seq: String(e.seq) }, [["seq", e.seq], ["ts", new Date(e.ts).toISOString()], ["key", e.key || ""],
        ["payload", e.preview + (e.truncated ? "…" : ""), "payload"]]);
    }));
    $("events-older").hidden = !events.next;
    $("events-older").dataset.next = String(events.next || 0);
  }

  // renderSchemas shows the topic's schema versions, newest first (s is
  // null without a registry: /ops/schemas answers 501).
  function renderSchemas(s) {
    var t = s && s.schemas && s.schemas[0];
    $("schema-current").textContent = !s ? "no schema registry" : t ? "version " + t.current + ", rule " + t.rule : "no schema";
    fill("schema-body", t ? t.versions.slice().reverse().map(function (v) {
      return row({ version: String(v.version) }, [["version", v.version], ["rule", v.rule], ["registered", v.created],
        ["schema", JSON.stringify(v.schema), "schema"]]);
    }) : []);
  }

  var selected = {};
  // dlqCount is the number of the group's dead letters, as the last poll
  // saw them ("1000+" when there are more): what a redrive or purge of
  // all would take.
  var dlqCount = "0";
  function renderGroup(topics, inflight, dlq) {
    var t = topics.topics[0] || { groups: [] };
    var g = t.groups.filter(function (x) { return x.group === route.group; })[0];
    dlqCount = g ? g.dead_letters.pending + (g.dead_letters.more ? "+" : "") : String(dlq.records.length);
    $("group-name").textContent = route.group;
    $("group-topic").textContent = route.topic;
    $("group-topic").setAttribute("href", topicHref(route.topic));
    if (!g) {
      info("group-info", [["state", "no cursor on this topic", "state"]]);
      fill("partitions-body", []);
    } else {
      info("group-info", [["committed", g.committed], ["head", g.head], ["lag", g.lag], ["lag ms", g.lag_ms, "lag_ms"],
        ["members", g.members.length ? g.members.join(", ") : "none", "members"], ["unsettled", g.unsettled],
        ["dead letters", g.dead_letters.pending + (g.dead_letters.more ? "+" : "") + " in " + g.dead_letters.topic, "dead_letters"]]);
      fill("partitions-body", g.partitions.map(function (p) {
        return row({ partition: String(p.partition) }, [["partition", p.partition], ["cursor", p.cursor],
          ["owner", p.owner || "-", "text"], ["unsettled", p.in_flight]]);
      }));
    }
    var here = inflight.groups.filter(function (x) { return x.group === route.group; })[0] || { in_flight: 0, waiting: 0, held: 0, buffered: 0, subscribers: 0 };
    info("group-inflight", [["in flight", here.in_flight, "in_flight"], ["waiting", here.waiting], ["of them held behind a key", here.held, "held"], ["buffered", here.buffered], ["subscribers", here.subscribers],
      ["unsettled, all members", (inflight.attempts || []).length, "attempts"]]);
    fill("deliveries-body", (inflight.deliveries || []).map(function (d) {
      return row({ seq: String(d.seq) }, [["seq", d.seq], ["state", d.state, "text"], ["attempt", d.attempt],
        ["deadline", new Date(d.deadline).toISOString()], ["reason", d.reason || "", "text"]]);
    }));
    fill("dlq-body", dlq.records.map(function (r) {
      var box = el("input", { type: "checkbox", "data-id": r.id });
      box.checked = !!selected[r.id];
      box.addEventListener("change", function () { if (box.checked) { selected[r.id] = true; } else { delete selected[r.id]; } });
      var h = r.headers || {};
      return row({ id: r.id }, [["select", box], ["id", r.id, "text"], ["original", h["x-redrive-id"] || h["x-dlq-id"] || "", "text"],
        ["reason", h["x-dlq-reason"] || "", "text"], ["attempts", h["x-dlq-attempts"] || ""],
        ["payload", JSON.stringify(r.payload === undefined ? null : r.payload).slice(0, 120), "payload"]]);
    }));
  }

  function renderConnections(cs) {
    fill("connections-body", cs.connections.map(function (c) {
      return row({ id: String(c.id) }, [["id", c.id], ["principal", c.principal || "-", "text"], ["remote", c.remote_addr, "text"],
        ["subscriptions", c.subscriptions.join(", ") || "-", "text"], ["queued", c.queue_depth], ["age", ago(c.age_ms)]]);
    }));
  }

  function act(path, payload) {
    $("action-result").textContent = "…";
    return request("POST", path, payload).then(function (r) {
      $("action-result").textContent = path + ": ok " + JSON.stringify(r.ids || r.seq || "");
      selected = {};
      body.dataset.lastAction = path;
      return r;
    }).catch(function (err) {
      $("action-result").textContent = String(err.message || err);
    });
  }
  // dlqAction redrives or purges the ticked dead letters at once; with
  // none ticked it would take the whole DLQ, so it asks first, naming
  // how many.
  var dlqPending = null;
  function dlqAction(path, verb) {
    var ids = Object.keys(selected);
    var p = { topic: route.topic, group: route.group };
    if (ids.length) {
      p.ids = ids.join(",");
      act(path, p);
      return;
    }
    if (dlqCount === "0") {
      $("action-result").textContent = "the dead-letter queue of " + route.group + " is empty: nothing to " + verb.toLowerCase();
      return;
    }
    dlqPending = { path: path, payload: p };
    $("dlq-confirm-text").textContent = "No dead letter is ticked: " + verb.toLowerCase() + " all " + dlqCount +
      (dlqCount === "1" ? " dead letter" : " dead letters") + " of " + route.group + " on " + route.topic + "?";
    $("dlq-confirm-yes").textContent = verb + " all " + dlqCount;
    $("dlq-confirm").hidden = false;
  }
  $("dlq-redrive").addEventListener("click", function () { dlqAction("dlq/redrive", "Redrive"); });
  $("dlq-purge").addEventListener("click", function () { dlqAction("dlq/purge", "Purge"); });
  $("dlq-confirm-no").addEventListener("click", function () {
    dlqPending = null;
    $("dlq-confirm").hidden = true;
    $("action-result").textContent = "cancelled: nothing was changed";
  });
  $("dlq-confirm-yes").addEventListener("click", function () {
    var a = dlqPending;
    dlqPending = null;
    $("dlq-confirm").hidden = true;
    if (a) { act(a.path, a.payload); }
  });
  $("cursor-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    $("cursor-confirm-text").textContent = "Move the cursor of " + route.group + " on " + route.topic + " to " +
      $("cursor-to").value + ($("cursor-value").value ? " " + $("cursor-value").value : "") + "?";
    $("cursor-confirm").hidden = false;
  });
  $("cursor-confirm-no").addEventListener("click", function () { $("cursor-confirm").hidden = true; });
  $("cursor-confirm-yes").addEventListener("click", function () {
    $("cursor-confirm").hidden = true;
    var to = $("cursor-to").value, p = { topic: route.topic, group: route.group, to: to };
    if (to === "seq") { p.seq = $("cursor-value").value; }
    if (to === "ts") { p.ts = $("cursor-value").value; }
    if ($("cursor-force").checked) { p.force = "true"; }
    act("cursor", p);
  });
  $("events-older").addEventListener("click", function () { eventsBefore = Number($("events-older").dataset.next); });

  function status(state, text) {
    body.dataset.state = state;
    $("ops-status").textContent = text;
  }

  function poll() {
    var r = route, work;
    var overview = Promise.all([get("topics"), get("inflight"), r.page === "overview" ? loadCharts() : null]).then(function (x) {
      $("ops-updated").textContent = new Date(x[0].now).toISOString();
      body.dataset.chartPoints = String(Object.keys(hist.topics).reduce(function (n, t) { return n + hist.topics[t].publish.length; }, 0));
      body.dataset.chartLast = String(hist.last); // the newest sample's time: it moves with every sample, also once the window is full
      return x;
    });
    if (r.page === "topic") {
      work = Promise.all([get("topics?topic=" + q(r.topic)),
        get("events?topic=" + q(r.topic) + (eventsBefore ? "&before=" + eventsBefore : "")),
        get("schemas?topic=" + q(r.topic)).catch(function () { return null; })]).then(function (x) {
        renderTopic(x[0], x[1]);
        renderSchemas(x[2]);
      });
    } else if (r.page === "group") {
      work = Promise.all([get("topics?topic=" + q(r.topic)), get("inflight?topic=" + q(r.topic) + "&group=" + q(r.group)),
        get("dlq?topic=" + q(r.topic) + "&group=" + q(r.group))]).then(function (x) { renderGroup(x[0], x[1], x[2]); });
    } else if (r.page === "connections") {
      work = get("connections").then(renderConnections);
    }
    Promise.all([overview, work]).then(function (x) {
      if (r.page === "overview") {
        renderOverview(x[0][0], x[0][1]);
      }
      body.dataset.polls = String(Number(body.dataset.polls) + 1);
      status("ok", "ok");
    }).catch(function (err) {
      status("error", String(err.message || err));
    }).then(function () {
      setTimeout(poll, interval);
    });
  }

  Array.prototype.forEach.call(document.querySelectorAll("[data-nav]"), function (a) { a.setAttribute("href", a.dataset.nav); });
  window.addEventListener("hashchange", show);
  show();
  get("settings").then(function (s) {
    settings = s;
    body.dataset.readOnly = String(s.read_only);
    var every = s.chart_interval_ms < 1000 ? s.chart_interval_ms + " ms" : Math.round(s.chart_interval_ms / 1000) + " s";
    var win = s.chart_window_ms < 60000 ? Math.round(s.chart_window_ms / 1000) + " s" : Math.round(s.chart_window_ms / 60000) + " min";
    $("chart-window").textContent = "(last " + win + ", sampled by the hub every " + every + ")";
  }).catch(function () {}).then(poll);
})();
