// /challenges/{slug}/: leaderboard tabs, taking part, teams, submitting to a phase (the upload
// page's retrying upload), and the parts that change (leaderboards, the team's submissions and
// their run logs) refreshed by polling their HTML fragments.
"use strict";

(() => {
  const { request, upload, withRetries, sleep, ApiError } = Api;
  const root = document.getElementById("challenge");
  if (!root) return;
  const slug = root.dataset.slug;
  const pollMs = Number(root.dataset.pollMs || 2000);
  const retryDelay = Number(root.dataset.retryDelayMs || 500);
  const resumableOver = Number(root.dataset.resumableOver || Infinity);
  const sliceBytes = Number(root.dataset.sliceBytes || 0);
  const message = document.getElementById("message");
  const lastHtml = new WeakMap();

  function show(text, kind = "muted") {
    message.textContent = text;
    message.className = kind;
  }

  // Tabs: one panel visible per phase; arrow keys move between tabs.
  function selectTab(container, split) {
    const tabs = Array.from(container.querySelectorAll("[role=tab]"));
    if (!tabs.some((tab) => tab.dataset.split === split)) split = tabs.length ? tabs[0].dataset.split : "";
    for (const tab of tabs) {
      const on = tab.dataset.split === split;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
    }
    for (const panel of container.querySelectorAll("[role=tabpanel]")) panel.hidden = panel.dataset.split !== split;
    container.dataset.selected = split;
  }

  for (const container of document.querySelectorAll(".board-tabs")) {
    selectTab(container, "");
    container.addEventListener("click", (event) => {
      const tab = event.target.closest("[role=tab]");
      if (tab) selectTab(container, tab.dataset.split);
    });
    container.addEventListener("keydown", (event) => {
      const tab = event.target.closest("[role=tab]");
      if (!tab || (event.key !== "ArrowRight" && event.key !== "ArrowLeft")) return;
      const tabs = Array.from(container.querySelectorAll("[role=tab]"));
      const step = event.key === "ArrowRight" ? 1 : tabs.length - 1;
      const next = tabs[(tabs.indexOf(tab) + step) % tabs.length];
      selectTab(container, next.dataset.split);
      next.focus();
    });
  }

  // A fragment replaced in place: open logs stay open, the chosen tab stays chosen.
  async function refresh(container) {
    const response = await fetch(container.dataset.fragment, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const html = await response.text();
    if (lastHtml.get(container) === html) return;
    const open = new Set(Array.from(container.querySelectorAll("details[open][data-submission-id]"), (d) => d.dataset.submissionId));
    container.innerHTML = html;
    lastHtml.set(container, html);
    for (const details of container.querySelectorAll("details[data-submission-id]")) {
      if (open.has(details.dataset.submissionId)) details.open = true;
    }
    if (container.classList.contains("board-tabs")) selectTab(container, container.dataset.selected || "");
    LocalTime.apply(container);
  }

  async function refreshAll() {
    await Promise.all(Array.from(document.querySelectorAll("[data-fragment]"), (c) => refresh(c).catch(() => {})));
  }

  // Polling stops, and the poll in flight ends, before the page reloads itself: a reload
  // never cuts a request short.
  let polling = true;
  let inflight = Promise.resolve();

  async function poll() {
    while (polling) {
      await sleep(pollMs);
      if (polling && !document.hidden) {
        inflight = refreshAll();
        await inflight;
      }
    }
  }

  async function reload() {
    polling = false;
    await inflight;
    location.reload();
  }

  async function post(path, json, done) {
    try {
      const response = await request("POST", path, json === undefined ? {} : { json });
      done(response.body);
    } catch (err) {
      show(err instanceof ApiError ? err.message : String(err), "error");
    }
  }

  const participate = document.getElementById("participate");
  if (participate) participate.addEventListener("click", () => {
    participate.disabled = true;
    post(`/api/challenges/${slug}/participate/`, undefined, (body) => {
      show(body.status === "approved" ? "You take part." : "Your request waits for a host.", "ok");
      reload();
    }).finally(() => { participate.disabled = false; });
  });

  const createForm = document.getElementById("team-create-form");
  if (createForm) createForm.addEventListener("submit", (event) => {
    event.preventDefault();
    post(`/api/challenges/${slug}/teams/`, { name: document.getElementById("team-name").value.trim() }, () => reload());
  });
  const joinForm = document.getElementById("team-join-form");
  if (joinForm) joinForm.addEventListener("submit", (event) => {
    event.preventDefault();
    post(`/api/challenges/${slug}/teams/join/`, { invite_code: document.getElementById("invite-code").value.trim() }, () => reload());
  });

  // Submit: the files one per request with retries (as the upload page does), then one job
  // with one idempotency key however often it is retried.
  function sendFile(path, makeForm, status) {
    return withRetries(() => upload(path, makeForm()), {
      retries: 3,
      baseDelay: retryDelay,
      onRetry: (n, delay, err) => { status.textContent = `Retry ${n}/3 in ${delay} ms (${err.status || "network"})…`; },
    });
  }

  // A file over the page's `data-resumable-over`: a resumable upload (resumable.js) that
  // resumes where the server's bytes end; the bar counts the bytes stored. Its id then becomes
  // the submission's file.
  async function sendResumable(form, file, status, bar, step) {
    const cancel = form.querySelector(".cancel-button");
    const resumable = new Resumable.Upload(file, {
      sliceBytes,
      baseDelay: retryDelay,
      onProgress: (stored, total) => {
        bar.value = step + (total ? stored / total : 1);
        status.textContent = `Uploading ${file.name}: ${Math.floor((100 * stored) / (total || 1))}% stored…`;
      },
      onRetry: (n, delay, err) => {
        status.textContent = `Connection lost (${err.status || "network"}): resuming ${file.name} in ${delay} ms…`;
      },
    });
    const onCancel = () => resumable.cancel();
    cancel.addEventListener("click", onCancel);
    cancel.hidden = false;
    try {
      return await resumable.send();
    } finally {
      cancel.hidden = true;
      cancel.removeEventListener("click", onCancel);
    }
  }

  function attachUpload(path, json) {
    return withRetries(() => request("POST", path, { json }), { retries: 3, baseDelay: retryDelay });
  }

  async function submitPhase(form) {
    const phase = form.dataset.phase;
    const files = Array.from(form.querySelector(".files").files);
    const status = form.querySelector(".submit-status");
    const bar = form.querySelector(".overall");
    const button = form.querySelector(".submit-button");
    if (!files.length) { status.textContent = "Pick at least one file."; status.className = "submit-status error"; return; }
    button.disabled = true;
    status.className = "submit-status muted";
    bar.max = files.length + 1;
    bar.value = 0;
    try {
      status.textContent = `Uploading ${files[0].name}…`;
      const fields = { challenge: slug, phase };
      if (form.dataset.kind === "code") {
        fields.entrypoint = form.querySelector(".entrypoint").value || "main.py";
        fields.config_file = form.querySelector(".config-file").value || "config.yaml";
      } else {
        fields.entrypoint = fields.config_file = "";
      }
      let first;
      if (files[0].size > resumableOver) {
        const uploadId = await sendResumable(form, files[0], status, bar, 0);
        first = await attachUpload("/api/submissions/", { upload_id: uploadId, filename: files[0].name, ...fields });
      } else {
        first = await sendFile("/api/submissions/", () => {
          const data = new FormData();
          data.append("files", files[0]);
          for (const [name, value] of Object.entries(fields)) if (value) data.append(name, value);
          return data;
        }, status);
      }
      const submissionId = first.body.submission_id;
      bar.value = 1;
      for (let i = 1; i < files.length; i++) {
        status.textContent = `Uploading ${files[i].name}…`;
        const path = `/api/submissions/${submissionId}/files/`;
        if (files[i].size > resumableOver) {
          await attachUpload(path, { upload_id: await sendResumable(form, files[i], status, bar, i), filename: files[i].name });
        } else {
          await sendFile(path, () => {
            const data = new FormData();
            data.append("file", files[i]);
            return data;
          }, status);
        }
        bar.value = i + 1;
      }
      status.textContent = "Submitting…";
      const key = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
      const job = await withRetries(() => request("POST", "/api/jobs/", { json: { submission_id: submissionId, idempotency_key: key } }));
      bar.value = files.length + 1;
      status.textContent = `Submitted: job ${job.body.job_id} is ${job.body.status}.`;
      status.className = "submit-status ok";
      form.reset();
      // A first submission made a team of one: the page shows it on a fresh load.
      if (root.dataset.hasTeam !== "true") { await reload(); return; }
      inflight = refreshAll();
      await inflight;
    } catch (err) {
      status.textContent = err instanceof ApiError || err.cancelled ? err.message : String(err);
      status.className = "submit-status error";
    } finally {
      button.disabled = false;
    }
  }

  for (const form of document.querySelectorAll("form.phase-submit")) {
    form.addEventListener("submit", (event) => { event.preventDefault(); submitPhase(form); });
  }

  if (document.querySelector("[data-fragment]")) poll();
})();
