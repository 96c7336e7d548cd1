// /submit/: reserve a slot, upload files one per request with progress and retries (a file
// over the form's `data-resumable-over` as a resumable upload, then attached), enqueue once.
"use strict";

(() => {
  const { request, upload, withRetries, sleep, el, ApiError } = Api;
  const $ = (id) => document.getElementById(id);
  const form = $("submit-form");
  const resumableOver = Number(form.dataset.resumableOver || Infinity);
  const sliceBytes = Number(form.dataset.sliceBytes || 0);
  const cancelButton = $("cancel");
  const message = $("message");
  const overall = $("overall");
  const overallText = $("overall-text");
  const fileList = $("file-progress");
  const enqueueButton = $("enqueue");
  const jobPanel = $("job");
  const FINISHED = new Set(["completed", "failed", "cancelled"]);

  let state = null; // {reservationId, submissionId, extendTimer, enqueueKey, resumable}

  function show(text, kind = "") {
    message.textContent = text;
    message.className = kind;
  }

  function releaseReservation() {
    if (!state || !state.reservationId) return Promise.resolve();
    clearInterval(state.extendTimer);
    const id = state.reservationId;
    state.reservationId = null;
    return request("POST", `/api/quotas/reservations/${id}/release/`).catch(() => {});
  }

  function fileRow(file, index) {
    const bar = el("progress", { max: "1", value: "0", id: `progress-${index}` });
    const status = el("span", { class: "muted", id: `status-${index}` }, "waiting");
    fileList.append(el("li", {}, el("div", {}, `${file.name} `, status), bar));
    return { bar, status };
  }

  function setOverall(done, total) {
    overall.max = total;
    overall.value = done;
    overallText.textContent = `${done}/${total} files uploaded`;
  }

  const retryDelay = () => Number(form.dataset.retryDelayMs || 500);

  async function sendFile(path, formData, row) {
    return withRetries(
      async () => {
        row.status.textContent = "uploading";
        row.bar.value = 0;
        return upload(path, formData(), (fraction) => { row.bar.value = fraction; });
      },
      {
        retries: 3,
        baseDelay: retryDelay(),
        onRetry: (n, delay, err) => {
          row.status.textContent = `retry ${n}/3 in ${delay} ms (${err.status || "network"})`;
        },
      },
    );
  }

  // A large file: a resumable upload (resumable.js), its bar counting the bytes the server
  // stored; it resumes where the server's bytes end after a lost connection or a 5xx.
  async function sendResumable(file, row) {
    const resumable = new Resumable.Upload(file, {
      sliceBytes,
      baseDelay: retryDelay(),
      onProgress: (stored, total) => {
        row.bar.value = total ? stored / total : 1;
        row.status.textContent = `uploading: ${Math.floor((100 * stored) / (total || 1))}% stored`;
      },
      onRetry: (n, delay, err) => {
        row.status.textContent = `connection lost (${err.status || "network"}): resuming in ${delay} ms`;
      },
    });
    state.resumable = resumable;
    cancelButton.hidden = false;
    try {
      row.status.textContent = "uploading";
      return await resumable.send();
    } finally {
      state.resumable = null;
      cancelButton.hidden = true;
    }
  }

  // A finished upload becomes the submission's first file (creating it) or one more file.
  function attachUpload(path, json, row) {
    row.status.textContent = "attaching";
    return withRetries(() => request("POST", path, { json }), { retries: 3, baseDelay: retryDelay() });
  }

  cancelButton.addEventListener("click", () => {
    if (state && state.resumable) state.resumable.cancel();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const files = Array.from($("files").files);
    if (!files.length) return show("Pick at least one file.", "error");
    let metadata = $("metadata").value.trim();
    if (metadata) {
      try { JSON.parse(metadata); } catch (_) { return show("Metadata must be JSON.", "error"); }
    }
    $("start").disabled = true;
    enqueueButton.disabled = true;
    jobPanel.hidden = true;
    fileList.replaceChildren();
    state = { reservationId: null, submissionId: null, extendTimer: null, enqueueKey: null, resumable: null };
    const rows = files.map(fileRow);
    setOverall(0, files.length);

    try {
      show("Reserving a quota slot…");
      const reservation = await request("POST", "/api/quotas/reservations/", { json: { ttl_seconds: 600 } });
      state.reservationId = reservation.body.reservation_id;
      // Keep the slot while a long upload runs.
      state.extendTimer = setInterval(() => {
        if (state.reservationId)
          request("POST", `/api/quotas/reservations/${state.reservationId}/extend/`, { json: { ttl_seconds: 600 } }).catch(() => {});
      }, 120000);

      show("Uploading…");
      const fields = {
        entrypoint: $("entrypoint").value || "main.py",
        config_file: $("config_file").value || "config.yaml",
        question_id: $("question_id").value,
        skill: $("skill").value,
      };
      let first;
      if (files[0].size > resumableOver) {
        const json = { upload_id: await sendResumable(files[0], rows[0]), filename: files[0].name, ...fields };
        if (metadata) json.metadata = JSON.parse(metadata);
        first = await attachUpload("/api/submissions/", json, rows[0]);
      } else {
        first = await sendFile("/api/submissions/", () => {
          const data = new FormData();
          data.append("files", files[0]);
          for (const [name, value] of Object.entries(fields)) data.append(name, value);
          if (metadata) data.append("metadata", metadata);
          return data;
        }, rows[0]);
      }
      state.submissionId = first.body.submission_id;
      rows[0].status.textContent = "uploaded";
      rows[0].status.className = "ok";
      rows[0].bar.value = 1;
      setOverall(1, files.length);

      for (let i = 1; i < files.length; i++) {
        const path = `/api/submissions/${state.submissionId}/files/`;
        if (files[i].size > resumableOver) {
          await attachUpload(path, { upload_id: await sendResumable(files[i], rows[i]), filename: files[i].name }, rows[i]);
        } else {
          await sendFile(path, () => {
            const data = new FormData();
            data.append("file", files[i]);
            return data;
          }, rows[i]);
        }
        rows[i].status.textContent = "uploaded";
        rows[i].status.className = "ok";
        rows[i].bar.value = 1;
        setOverall(i + 1, files.length);
      }
      show(`All ${files.length} files uploaded to submission ${state.submissionId}.`, "ok");
      enqueueButton.disabled = false;
    } catch (err) {
      const failed = rows.find((row) => row.status.textContent !== "uploaded" && row.status.className !== "ok");
      if (failed) {
        failed.status.textContent = err.cancelled ? "cancelled" : "refused";
        failed.status.className = "error";
        failed.bar.classList.add("refused");
      }
      show(err instanceof ApiError || err.cancelled ? err.message : String(err), "error");
      await releaseReservation();
      $("start").disabled = false;
    }
  });

  async function enqueue() {
    if (!state || !state.submissionId) return;
    // One key per enqueue intent, reused for every retry and every further click.
    if (!state.enqueueKey) state.enqueueKey = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
    enqueueButton.disabled = true;
    show("Enqueueing…");
    const payload = { submission_id: state.submissionId, idempotency_key: state.enqueueKey };
    if (state.reservationId) payload.reservation_id = state.reservationId;
    try {
      const response = await withRetries(async () => {
        for (let waits = 0; ; waits++) {
          try {
            return await request("POST", "/api/jobs/", { json: payload });
          } catch (err) {
            // Another request with this key is still running: wait and ask again.
            if (err.code === "idempotency_request_in_progress" && waits < 20) { await sleep(500); continue; }
            throw err;
          }
        }
      });
      clearInterval(state.extendTimer);
      state.reservationId = null; // consumed by the job
      show(response.body.idempotent_hit ? "Job already enqueued." : "Job enqueued.", "ok");
      followJob(response.body.job_id);
    } catch (err) {
      show(err.message, "error");
      enqueueButton.disabled = false;
    }
  }
  enqueueButton.addEventListener("click", enqueue);

  // The job's end replaces "Job enqueued.": its outcome, the score, and what happens next.
  function showFinished(job) {
    const scored = Api.score(job.score) === "" ? "" : ` Score ${Api.score(job.score)}.`;
    if (job.status === "completed" && job.submission_status === "review_pending") {
      show(`Job completed.${scored} The submission now waits for a reviewer.`, "ok");
    } else if (job.status === "completed") {
      show(`Job completed.${scored}`, "ok");
    } else {
      show(`Job ${job.status}.${job.error ? " " + job.error : ""} See its logs.`, "error");
    }
  }

  async function followJob(jobId) {
    jobPanel.hidden = false;
    $("job-id").textContent = jobId;
    $("job-link").href = `/jobs/${jobId}/`;
    for (;;) {
      try {
        const { body } = await request("GET", `/api/jobs/${jobId}/`);
        $("job-status").textContent = body.status;
        $("job-score").textContent = Api.score(body.score);
        $("job-score-line").hidden = Api.score(body.score) === "";
        if (FINISHED.has(body.status)) {
          showFinished(body);
          return;
        }
      } catch (err) {
        $("job-status").textContent = `unknown (${err.message})`;
      }
      await sleep(Number(form.dataset.pollMs || 2000));
    }
  }

  window.addEventListener("pagehide", () => { if (state && state.reservationId && !state.submissionId) releaseReservation(); });
})();
