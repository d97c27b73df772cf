// Keeps a console page current without a reload: every few seconds the
// page is fetched again (same URL, same cookie) and its <main> swapped in
// when it changed. The fetched page is the server's escaped HTML; scripts
// in it never run (innerHTML does not execute them, and the page's
// Content-Security-Policy allows only this file).
(function () {
  "use strict";
  var live = document.getElementById("live");
  var main = document.getElementById("main");
  if (!live || !main) return;
  var every = (parseInt(live.getAttribute("data-refresh"), 10) || 5) * 1000;
  function tick() {
    // A form being edited is not replaced under the user's hands.
    var active = document.activeElement;
    if (active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      setTimeout(tick, every);
      return;
    }
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("main");
        if (fresh && fresh.innerHTML !== main.innerHTML) main.innerHTML = fresh.innerHTML;
        live.textContent = "updated " + new Date().toLocaleTimeString();
        live.className = "live";
        document.body.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function (e) {
        live.textContent = "not updating: " + e.message;
        live.className = "live stale-feed";
      })
      .then(function () {
        setTimeout(tick, every);
      });
  }
  setTimeout(tick, every);
})();
