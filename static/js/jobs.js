// /jobs/ (list) and /jobs/<id>/ (status, logs, cancel).
"use strict";

(() => {
  const { request, listOf, when, el, score, scoreCell } = Api;
  const message = document.getElementById("message");
  const FINISHED = new Set(["completed", "failed", "cancelled"]);

  async function loadList() {
    const status = document.getElementById("status-filter").value;
    const tbody = document.querySelector("#jobs tbody");
    try {
      const { body } = await request("GET", "/api/jobs/" + (status ? `?status=${encodeURIComponent(status)}` : ""));
      const jobs = listOf(body, "jobs");
      tbody.replaceChildren(...jobs.map((job) => el("tr", { "data-job-id": job.job_id || job.id },
        el("td", {}, el("a", { href: `/jobs/${job.job_id || job.id}/`, title: "details and logs" },
          el("code", {}, (job.job_id || job.id).slice(0, 8)))),
        el("td", { class: "status" }, job.status),
        el("td", { class: "wide" }, job.submission_status || ""),
        scoreCell(job.score),
        el("td", { class: "wide" }, el("code", {}, (job.submission_id || "").slice(0, 8))),
        el("td", {}, when(job.created_at)),
        el("td", { class: "wide" }, when(job.finished_at)),
      )));
      message.textContent = jobs.length ? "" : "No jobs yet.";
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
    }
  }

  async function loadDetail(panel) {
    const jobId = panel.dataset.jobId;
    const cancel = document.getElementById("cancel");
    cancel.onclick = async () => {
      cancel.disabled = true;
      try { await request("POST", `/api/jobs/${jobId}/cancel/`); } catch (err) { document.getElementById("job-error").textContent = err.message; }
      refresh();
    };
    async function refresh() {
      try {
        const { body: job } = await request("GET", `/api/jobs/${jobId}/`);
        document.getElementById("job-status").textContent = job.status;
        document.getElementById("job-meta").textContent =
          `submission ${job.submission_id || ""} (${job.submission_status || "?"}` +
          (job.score === null || job.score === undefined ? "" : `, score ${score(job.score)}`) +
          `) · created ${when(job.created_at)}` + (job.finished_at ? ` · finished ${when(job.finished_at)}` : "");
        document.getElementById("job-error").textContent = job.error || "";
        cancel.hidden = FINISHED.has(job.status);
        const { body: logs } = await request("GET", `/api/jobs/${jobId}/logs/`);
        document.getElementById("logs").textContent = (typeof logs === "string" ? logs : logs.logs) || "(no output yet)";
        if (!FINISHED.has(job.status)) setTimeout(refresh, 2000);
      } catch (err) {
        document.getElementById("job-error").textContent = err.message;
      }
    }
    refresh();
  }

  const panel = document.getElementById("job-detail");
  if (panel) loadDetail(panel);
  else {
    document.getElementById("status-filter").addEventListener("change", loadList);
    loadList();
    setInterval(loadList, 5000);
  }
})();
