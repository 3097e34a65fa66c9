// The browser's time zone for the sign-in's last step: a user who has not chosen a time zone
// gets the browser's (the security page changes it). Without this script nothing is sent and
// the user's pages stay in UTC until a zone is chosen there.
"use strict";
document.querySelectorAll("input[name='time_zone'][data-browser]").forEach(function (input) {
  try {
    input.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    input.value = "";
  }
});
