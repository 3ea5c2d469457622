/*
 * The run page's running steps, kept current between two renderings of their region.
 *
 * Each block (.live-step, rendered by workflows/admin/live/progress.py) names the API
 * address of its step (data-step-url) and of its log frames (data-frames-url), and the
 * last frame shown (data-after). For each block this script reads the step (progress,
 * message, status) and the frames after the cursor, updates the block in place, and
 * reads again after data-interval milliseconds (or at once after a long poll, when the
 * section gives data-wait seconds). It stops when the step is no longer running and
 * says so. live_page.js renders the whole region again when the run moves (a block
 * then stands for its step anew, found by its id) and fires "wf:regions": blocks that
 * appeared are followed from then on. Without the API, the region's renderings alone
 * move the blocks; without JavaScript, or if a read fails, the page stays as it was
 * rendered. No library, no CDN: plain DOM and fetch.
 */
(function () {
  "use strict";

  if (!window.fetch) {
    return;
  }
  var following = {};

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  function readJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error(response.status + " from " + url);
        }
        return response.json();
      });
  }

  // As workflows.admin.live.progress: at most three decimals, none when whole.
  function number(value) {
    return String(Math.round(value * 1000) / 1000);
  }

  function percentDone(done, total) {
    if (done === null || done === undefined || !total || total <= 0) {
      return null;
    }
    return Math.round(Math.min(Math.max(done / total * 100, 0), 100) * 10) / 10;
  }

  function progressText(done, total) {
    if (done === null || done === undefined) {
      return "no progress reported yet";
    }
    var percent = percentDone(done, total);
    if (percent === null) {
      return number(done) + " done";
    }
    return number(done) + " of " + number(total) + " (" + number(percent) + "%)";
  }

  function showProgress(block, step) {
    var bar = block.querySelector("progress");
    var percent = percentDone(step.progress_done, step.progress_total);
    if (percent === null) {
      bar.removeAttribute("value"); // indeterminate
    } else {
      bar.value = percent;
    }
    block.querySelector(".live-count").textContent =
      progressText(step.progress_done, step.progress_total);
    block.querySelector(".live-message").textContent = step.progress_message || "";
    var summary = block.querySelector(".live-summary");
    var empty = !step.summary || Object.keys(step.summary).length === 0;
    summary.hidden = empty;
    // Indented as the page writes JSON (json.dumps(indent=2)); text, never markup.
    summary.querySelector("pre").textContent = empty ? "" : JSON.stringify(step.summary, null, 2);
  }

  function appendLines(block, frames) {
    var tail = block.querySelector(".live-tail");
    var keep = Number(block.dataset.lines) || 5;
    var after = Number(block.dataset.after) || 0;
    frames.forEach(function (frame) {
      if (frame.seq <= after) {
        return; // a rendering of the region since the read shows it already
      }
      var line = document.createElement("div");
      line.className = "live-line stream-" + frame.stream;
      line.textContent = frame.text; // text, never markup
      tail.appendChild(line);
      block.dataset.after = String(frame.seq);
    });
    while (tail.children.length > keep) {
      tail.removeChild(tail.firstChild);
    }
  }

  function showEnded(block, status) {
    var badge = block.querySelector(".live-status");
    badge.className = "live-status wf-badge st-" + status;
    badge.textContent = status.replace(/_/g, " ");
    var note = block.querySelector(".live-note");
    note.textContent = "The step is no longer running.";
    note.hidden = false;
    block.classList.add("live-ended");
  }

  function section(block) {
    return block.closest("#live") || block;
  }

  function framesURL(block) {
    var url = block.dataset.framesUrl + "?after=" + encodeURIComponent(block.dataset.after || "0");
    var wait = section(block).dataset.wait;
    return wait ? url + "&wait=" + encodeURIComponent(wait) : url;
  }

  async function follow(id) {
    var block = document.getElementById(id);
    var readFrames = Boolean(block.dataset.framesUrl);
    for (;;) {
      block = document.getElementById(id);
      if (!block) {
        delete following[id]; // the step's block went with a new rendering
        return;
      }
      var step;
      try {
        step = await readJSON(block.dataset.stepUrl);
      } catch (error) {
        delete following[id];
        return; // the page stays as rendered
      }
      block = document.getElementById(id) || block; // a rendering may have come meanwhile
      showProgress(block, step);
      if (readFrames) {
        try {
          appendLines(block, (await readJSON(framesURL(block))).frames || []);
        } catch (error) {
          readFrames = false; // progress still updates
        }
      }
      if (step.status !== "running") {
        showEnded(block, step.status);
        delete following[id];
        return;
      }
      var live = section(block);
      await sleep(live.dataset.wait && readFrames ? 200 : Number(live.dataset.interval) || 1000);
    }
  }

  function followNew() {
    Array.prototype.forEach.call(document.querySelectorAll(".live-step[data-step-url]"), function (block) {
      if (block.dataset.stepUrl && block.id && !following[block.id]) {
        following[block.id] = true;
        follow(block.id);
      }
    });
  }

  followNew();
  document.addEventListener("wf:regions", followNew);
})();
