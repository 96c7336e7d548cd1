// /challenges/{slug}/host/: reveal a phase's hidden splits now (the reveal API, idempotent),
// and grant a team extra submissions (the grants API).
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
