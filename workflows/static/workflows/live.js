/*
 * The run page's running steps, kept current without reloading the page.
 *
 * Each block (.live-step, rendered by workflows/admin/live/progress.py) names the API
 * address of its step (data-step-url) and of its log frames (data-frames-url), and the
 * last frame shown (data-after). For each block this script reads the step (progress,
 * message, status) and the frames after the cursor, updates the block in place, and
 * reads again after data-interval milliseconds (or at once after a long poll, when the
 * section gives data-wait seconds). It stops when the step is no longer running and
 * says so. Without JavaScript, or if a read fails, the page stays as it was rendered.
 * No library, no CDN: plain DOM and fetch.
 */
(function () {
  "use strict";

  var section = document.getElementById("live");
  if (!section || !window.fetch) {
    return;
  }
  var interval = Number(section.dataset.interval) || 1000;
  var wait = section.dataset.wait || "";

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
    frames.forEach(function (frame) {
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
    note.textContent = "The step is no longer running: reload the page for the rest of the run.";
    note.hidden = false;
    block.classList.add("live-ended");
  }

  function framesURL(block) {
    var url = block.dataset.framesUrl + "?after=" + encodeURIComponent(block.dataset.after || "0");
    return wait ? url + "&wait=" + encodeURIComponent(wait) : url;
  }

  async function follow(block) {
    var readFrames = Boolean(block.dataset.framesUrl);
    for (;;) {
      var step;
      try {
        step = await readJSON(block.dataset.stepUrl);
      } catch (error) {
        return; // the page stays as rendered
      }
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
        return;
      }
      await sleep(wait && readFrames ? 200 : interval);
    }
  }

  Array.prototype.forEach.call(section.querySelectorAll(".live-step[data-step-url]"), function (block) {
    if (block.dataset.stepUrl) {
      follow(block);
    }
  });
})();
