// /challenges/{slug}/host/: reveal a phase's hidden splits now (the reveal API, idempotent),
// grant a team extra submissions (the grants API), and each phase's rescore: its section is
// polled while the rescore runs; "Retry failures" and "Cancel rescore" call the rescore API.
"use strict";

(() => {
  const root = document.getElementById("host-console");
  if (!root) return;
  const message = document.getElementById("message");
  for (const button of root.querySelectorAll(".reveal-button")) {
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const { body } = await Api.request("POST", `/api/challenges/${root.dataset.slug}/phases/${button.dataset.phase}/reveal/`);
        message.textContent = `Revealed ${body.phase} at ${new Date(body.revealed_at).toLocaleString()}.`;
        message.className = "ok";
        location.reload();
      } catch (err) {
        message.textContent = err.message;
        message.className = "error";
        button.disabled = false;
      }
    });
  }

  // A phase's rescore section, replaced in place by its fragment when it changed.
  const pollMs = Number(root.dataset.pollMs || 2000);
  const lastHtml = new WeakMap();
  async function refreshRescore(panel) {
    const response = await fetch(panel.dataset.fragment, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const html = await response.text();
    if (lastHtml.get(panel) === html) return;
    panel.innerHTML = html;
    lastHtml.set(panel, html);
  }
  const running = () => Array.from(root.querySelectorAll(".rescore-panel")).filter((p) => p.querySelector(".rescore[data-state=running]"));
  let polling = false; // one poll loop at a time; it ends when no rescore runs
  async function pollRescores() {
    if (polling) return;
    polling = true;
    try {
      while (running().length) {
        await Api.sleep(pollMs);
        if (!document.hidden) await Promise.all(running().map((p) => refreshRescore(p).catch(() => {})));
      }
    } finally {
      polling = false;
    }
  }
  root.addEventListener("click", async (event) => {
    const button = event.target.closest(".rescore-retry, .rescore-cancel");
    if (!button) return;
    const action = button.classList.contains("rescore-retry") ? "retry" : "cancel";
    button.disabled = true;
    try {
      const { body } = await Api.request("POST", `/api/challenges/${root.dataset.slug}/phases/${button.dataset.phase}/rescore/${action}/`);
      message.textContent = `Rescore of ${button.dataset.phase} to version ${body.version}: ${body.state}, ${body.done} done, ${body.failed} failed of ${body.total}.`;
      message.className = "ok";
      await refreshRescore(document.getElementById(`rescore-${button.dataset.phase}`));
      pollRescores();
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
      button.disabled = false;
    }
  });
  pollRescores();

  const grantForm = document.getElementById("grant-form");
  if (grantForm) grantForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (id) => document.getElementById(id).value;
    const grant = { phase: value("grant-phase"), limit: value("grant-limit"), extra: Number(value("grant-extra")), reason: value("grant-reason") };
    try {
      await Api.request("POST", `/api/challenges/${root.dataset.slug}/teams/${value("grant-team")}/grants/`, { json: grant });
      location.reload();
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
    }
  });
})();
