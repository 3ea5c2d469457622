/*
 * The run page and the flow page, kept current while their run or flow goes on.
 *
 * The page (#content-main) names its live endpoint (data-live-url, an admin view:
 * workflows/admin/live/pages.py), the fingerprint of what it shows (data-fingerprint)
 * and how often to ask (data-interval, milliseconds). Each live region is an element
 * with data-live-region="<name>". The script asks the endpoint with the fingerprint it
 * holds; when the run or flow moved, the answer carries each region's markup, rendered
 * on the server from the fragments the page itself includes, and the script swaps it in
 * (keeping open the <details> a person opened). It asks less often while the tab is
 * hidden, asks at once when it shows again, and stops once the answer says the run or
 * flow ended (after showing that last state). Every half minute it asks without a
 * fingerprint, so that times in words ("in 5 seconds") stay true.
 *
 * After a swap it fires "wf:regions" on the document: live.js follows the running steps
 * of blocks that appeared. Without JavaScript, or if a read fails, the page stays as it
 * was rendered. No library, no CDN: plain DOM and fetch.
 */
(function () {
  "use strict";

  var main = document.getElementById("content-main");
  if (!main || !main.dataset.liveUrl || !window.fetch) {
    return;
  }
  var interval = Number(main.dataset.interval) || 1500;
  var HIDDEN_INTERVAL = 15000;
  var REFRESH_EVERY = 30000;
  var lastFull = Date.now();

  function pause(ms) {
    return new Promise(function (resolve) {
      var timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        document.removeEventListener("visibilitychange", shown);
        resolve();
      }
      function shown() {
        if (!document.hidden) {
          done();
        }
      }
      document.addEventListener("visibilitychange", shown);
    });
  }

  function liveURL() {
    // The page's own parameters (a members page, say) pick what the regions show.
    var params = new URLSearchParams(window.location.search);
    var full = Date.now() - lastFull >= REFRESH_EVERY;
    params.set("fingerprint", full ? "" : main.dataset.fingerprint || "");
    if (full) {
      lastFull = Date.now();
    }
    return main.dataset.liveUrl + "?" + params.toString();
  }

  // What makes a <details> the same one after a swap: its region and its summary's text.
  function detailsKey(details) {
    var summary = details.querySelector("summary");
    return summary ? summary.textContent.replace(/\(\d+\)/, "").trim() : "";
  }

  function swap(region, html) {
    var opened = {};
    var closed = {};
    Array.prototype.forEach.call(region.querySelectorAll("details"), function (details) {
      (details.open ? opened : closed)[detailsKey(details)] = true;
    });
    region.innerHTML = html;
    Array.prototype.forEach.call(region.querySelectorAll("details"), function (details) {
      var key = detailsKey(details);
      if (opened[key]) {
        details.open = true;
      } else if (closed[key]) {
        details.open = false;
      }
    });
  }

  function apply(regions) {
    Object.keys(regions).forEach(function (name) {
      var region = main.querySelector('[data-live-region="' + name + '"]');
      if (region) {
        swap(region, regions[name]);
      }
    });
    document.dispatchEvent(new CustomEvent("wf:regions"));
  }

  async function poll() {
    for (;;) {
      await pause(document.hidden ? HIDDEN_INTERVAL : interval);
      var answer;
      try {
        var response = await fetch(liveURL(), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        });
        if (!response.ok) {
          return; // signed out, or no longer allowed: the page stays as it is
        }
        answer = await response.json();
      } catch (error) {
        continue; // a network blip: ask again at the next turn
      }
      if (answer.regions) {
        apply(answer.regions);
      }
      main.dataset.fingerprint = answer.fingerprint;
      if (answer.final) {
        main.dataset.final = "true";
        return;
      }
    }
  }

  poll();
})();
