// The payer page's progressive enhancement: copy buttons and a ticking countdown. The page
// works without it (the server writes the deadline and the minutes left, and reloads the page
// at the deadline). No request leaves the page.
(function () {
  "use strict";

  var status = document.getElementById("copy-status");

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

  function announce() {
    if (!status) return;
    // Announced once per click by the polite status region.
    status.textContent = "";
    window.setTimeout(function () {
      status.textContent = status.getAttribute("data-copied");
    }, 50);
  }

  var buttons = document.querySelectorAll("button[data-copy]");
  Array.prototype.forEach.call(buttons, function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = button.getAttribute("data-copy");
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(announce, function () {
          fallbackCopy(text);
          announce();
        });
      } else {
        fallbackCopy(text);
        announce();
      }
    });
  });

  // The countdown: role="timer" is not a live region, so screen readers do not announce
  // each second; the deadline above it reads on its own.
  var left = document.getElementById("left");
  var deadlineEl = document.getElementById("deadline");
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
    var ms = deadline - Date.now();
    if (ms <= 0) {
      left.textContent = "0:00";
      // The requisite is no longer valid: show the outcome instead.
      window.location.reload();
      return;
    }
    var s = Math.floor(ms / 1000);
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    left.textContent = (h > 0 ? h + ":" + pad(m) : String(m)) + ":" + pad(s % 60);
    window.setTimeout(tick, 1000 - (ms % 1000));
  }
  tick();
})();
