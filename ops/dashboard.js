(function () {
  "use strict";
  var tokenKey = "promlib.ops.token";
  var interval = 1000;
  var body = document.body;
  var tokenInput = document.getElementById("ops-token");

  var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(tokenKey, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  tokenInput.value = sessionStorage.getItem(tokenKey) || "";
  tokenInput.addEventListener("change", function () {
    sessionStorage.setItem(tokenKey, tokenInput.value.trim());
  });

  function get(path) {
    var headers = { "Accept": "application/json" };
    var token = sessionStorage.getItem(tokenKey);
    if (token) {
      headers["Authorization"] = "Bearer " + token;
    }
    return fetch(path, { headers: headers, cache: "no-store" }).then(function (res) {
      return res.json().then(function (b) {
        if (!res.ok) {
          throw new Error(path + ": " + ((b && b.error && b.error.msg) || ("HTTP " + res.status)));
        }
        return b;
      });
    });
  }

  function row(attrs, cells) {
    var tr = document.createElement("tr");
    Object.keys(attrs).forEach(function (k) { tr.dataset[k] = attrs[k]; });
    cells.forEach(function (c) {
      var td = document.createElement("td");
      td.dataset.field = c[0];
      td.textContent = String(c[1]);
      tr.appendChild(td);
    });
    return tr;
  }

  function render(topics, inflight) {
    var trows = [], grows = [];
    topics.topics.forEach(function (t) {
      var maxLag = 0;
      t.groups.forEach(function (g) {
        maxLag = Math.max(maxLag, g.lag);
        var tr = row({ topic: t.topic, group: g.group }, [
          ["topic", t.topic], ["group", g.group], ["committed", g.committed],
          ["lag", g.lag], ["lag_ms", g.lag_ms], ["in_flight", g.in_flight],
          ["waiting", g.waiting], ["buffered", g.buffered], ["subscribers", g.subscribers]
        ]);
        if (g.lag > 0) {
          tr.className = "behind";
        }
        grows.push(tr);
      });
      trows.push(row({ topic: t.topic }, [
        ["topic", t.topic], ["head", t.head], ["groups", t.groups.length],
        ["in_flight", t.in_flight], ["lag", maxLag], ["dlq_pending", t.dlq ? t.dlq.pending : 0]
      ]));
    });
    document.getElementById("topics-body").replaceChildren.apply(document.getElementById("topics-body"), trows);
    document.getElementById("groups-body").replaceChildren.apply(document.getElementById("groups-body"), grows);
    document.getElementById("inflight-total").textContent = String(inflight.in_flight);
    document.getElementById("ops-updated").textContent = new Date(topics.now).toISOString();
  }

  function status(state, text) {
    body.dataset.state = state;
    document.getElementById("ops-status").textContent = text;
  }

  function poll() {
    Promise.all([get("topics"), get("inflight")]).then(function (r) {
      render(r[0], r[1]);
      body.dataset.polls = String(Number(body.dataset.polls) + 1);
      status("ok", "ok");
    }).catch(function (err) {
      status("error", String(err.message || err));
    }).then(function () {
      setTimeout(poll, interval);
    });
  }

  poll();
})();
