// The payer page's progressive enhancement: copy buttons, a ticking countdown and the live
// status. The page works without it: the server writes the deadline and the minutes left, and
// a "Refresh status" link reloads the page. The script asks this origin only: the page's
// status (`<main data-status>`, a tiny JSON) every few seconds while the payment is open, and,
// once the status differs from what the page shows, the page itself, whose new content it
// puts in place of the old without a reload (announced by the polite status region #live).
(function () {
  "use strict";

  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main) return;

  // The first ask comes this soon; each unchanged answer waits half as long again, up to the
  // most (a payer who has paid sees it within ten seconds); a re-check is asked about seldom.
  var OPEN_FIRST_MS = 2000;
  var OPEN_MOST_MS = 8000;
  var WAITING_MS = 60000;
  // A failed ask doubles the wait, up to a minute.
  var ERROR_MOST_MS = 60000;

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "absolute";
    area.style.left = "-9999px";
    document.body.appendChild(area);
    area.select();
    try {
      document.execCommand("copy");
    } catch (e) {
      // Nothing more to try: the value stays selectable on the page.
    }
    document.body.removeChild(area);
  }

  // Says `text` in a polite status region once, even when it says the same again.
  function announce(region, text) {
    if (!region) return;
    region.textContent = "";
    window.setTimeout(function () {
      region.textContent = text;
    }, 50);
  }

  function setUpCopy(root) {
    var status = root.querySelector("#copy-status");
    var copied = function () {
      if (status) announce(status, status.getAttribute("data-copied"));
    };
    var buttons = root.querySelectorAll("button[data-copy]");
    Array.prototype.forEach.call(buttons, function (button) {
      button.hidden = false;
      button.addEventListener("click", function () {
        var text = button.getAttribute("data-copy");
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(text).then(copied, function () {
            fallbackCopy(text);
            copied();
          });
        } else {
          fallbackCopy(text);
          copied();
        }
      });
    });
  }

  // The countdown: role="timer" is not a live region, so screen readers do not announce
  // each second; the deadline above it reads on its own. A countdown of replaced content
  // stops (its element is no longer in the page).
  function setUpCountdown(root) {
    var left = root.querySelector("#left");
    var deadlineEl = root.querySelector("#deadline");
    if (!left) return;
    var deadline = Date.parse(left.getAttribute("data-deadline"));
    if (isNaN(deadline)) return;
    if (deadlineEl) {
      // The deadline in the payer's own time zone and language.
      try {
        deadlineEl.textContent = new Date(deadline).toLocaleString(document.documentElement.lang, {
          day: "numeric", month: "long", hour: "2-digit", minute: "2-digit"
        });
      } catch (e) {
        // Keep the server's UTC text.
      }
    }
    function pad(n) { return n < 10 ? "0" + n : String(n); }
    function tick() {
      if (!document.body.contains(left)) return;
      var ms = deadline - Date.now();
      if (ms <= 0) {
        left.textContent = "0:00";
        // The requisite is no longer valid: ask now, and the outcome replaces it.
        checkSoon(0);
        return;
      }
      var s = Math.floor(ms / 1000);
      var h = Math.floor(s / 3600);
      var m = Math.floor((s % 3600) / 60);
      left.textContent = (h > 0 ? h + ":" + pad(m) : String(m)) + ":" + pad(s % 60);
      window.setTimeout(tick, 1000 - (ms % 1000));
    }
    tick();
  }

  function enhance(root) {
    setUpCopy(root);
    setUpCountdown(root);
    // The script keeps the page up to date: the no-script link is not needed.
    var refresh = root.querySelector("#refresh");
    if (refresh && watching) refresh.hidden = true;
  }

  // The live status.
  var statusUrl = main.getAttribute("data-status");
  var watching = Boolean(statusUrl && window.fetch && window.DOMParser);
  var delay = OPEN_FIRST_MS;
  var timer = null;
  var busy = false;
  var gone = false;

  function phase() { return main.getAttribute("data-phase"); }

  function checkSoon(ms) {
    if (timer) window.clearTimeout(timer);
    timer = null;
    if (!watching || gone || phase() === "closed" || document.hidden) return;
    timer = window.setTimeout(check, ms);
  }

  function unchanged() {
    delay = phase() === "waiting" ? WAITING_MS : Math.min(Math.round(delay * 1.5), OPEN_MOST_MS);
    checkSoon(delay);
  }

  function failed() {
    busy = false;
    delay = Math.min(delay * 2, ERROR_MOST_MS);
    checkSoon(delay);
  }

  function check() {
    timer = null;
    if (busy) return;
    busy = true;
    window.fetch(statusUrl, { cache: "no-store", credentials: "omit" })
      .then(function (r) {
        if (r.status === 404) {
          // The page is no longer there (the shop turned it off): stop asking.
          gone = true;
          return null;
        }
        if (!r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (s) {
        if (!s) {
          busy = false;
          return null;
        }
        if (s.status === main.getAttribute("data-state")) {
          busy = false;
          main.setAttribute("data-phase", s.phase);
          unchanged();
          return null;
        }
        return replace();
      })
      .then(null, failed);
  }

  // The page again, its new content in place of the old.
  function replace() {
    return window.fetch(window.location.pathname, { cache: "no-store", credentials: "omit" })
      .then(function (r) {
        if (!r.ok) throw new Error("page " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new window.DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("view");
        var freshMain = doc.getElementById("main");
        var old = document.getElementById("view");
        if (!fresh || !freshMain || !old) throw new Error("not the page");
        var hadFocus = old.contains(document.activeElement);
        var view = document.importNode(fresh, true);
        old.parentNode.replaceChild(view, old);
        main.setAttribute("data-state", freshMain.getAttribute("data-state"));
        main.setAttribute("data-phase", freshMain.getAttribute("data-phase"));
        document.title = doc.title;
        enhance(view);
        var heading = view.querySelector("h1");
        if (heading) {
          announce(live, heading.textContent);
          if (hadFocus) {
            // What had the focus is gone: the new heading takes it.
            heading.setAttribute("tabindex", "-1");
            heading.focus();
          }
        }
        busy = false;
        delay = OPEN_FIRST_MS;
        checkSoon(phase() === "waiting" ? WAITING_MS : delay);
      });
  }

  document.addEventListener("visibilitychange", function () {
    // A hidden page does not ask; back in view (from the bank's app, say), it asks at once.
    if (document.hidden) {
      if (timer) window.clearTimeout(timer);
      timer = null;
    } else {
      delay = OPEN_FIRST_MS;
      checkSoon(0);
    }
  });

  enhance(main);
  checkSoon(phase() === "waiting" ? WAITING_MS : OPEN_FIRST_MS);
})();
