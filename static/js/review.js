// /review/: the queue; claim, extend (while open), release and complete.
"use strict";

(() => {
  const { request, listOf, when, el, score, scoreCell } = Api;
  const $ = (id) => document.getElementById(id);
  const message = $("message");
  const panel = $("claim-panel");
  let current = null; // {id, timer}

  function show(text, kind = "muted") {
    message.textContent = text;
    message.className = kind;
  }

  async function loadQueue() {
    try {
      const { body } = await request("GET", "/api/review/queue/");
      const rows = listOf(body, "queue", "submissions");
      const tbody = $("queue").querySelector("tbody");
      if (!rows.length) {
        // Said in the table, not the message line: a verdict's confirmation stays readable.
        tbody.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "muted" }, "Nothing waits for review.")));
        return;
      }
      tbody.replaceChildren(...rows.map((row) => {
        const id = row.submission_id || row.id;
        const holder = row.claimed_by ? `${row.claimed_by.username} until ${when(row.claim_expires_at)}` : "unclaimed";
        return el("tr", { "data-submission-id": id },
          el("td", {}, el("code", {}, id.slice(0, 12))),
          el("td", {}, row.owner ? row.owner.username : ""),
          el("td", {}, row.question_id || ""),
          el("td", {}, row.skill || ""),
          scoreCell(row.score),
          el("td", {}, when(row.created_at)),
          el("td", { class: "claim" }, holder),
          el("td", {}, el("button", { type: "button", class: "claim-button", onclick: () => claim(id) }, "Claim")),
        );
      }));
    } catch (err) {
      show(err.message, "error");
    }
  }

  function claimedBy(err) {
    const who = err.body.claimed_by ? err.body.claimed_by.username : "another reviewer";
    return `Already claimed by ${who} until ${when(err.body.claim_expires_at)}.`;
  }

  async function claim(id) {
    try {
      const { body } = await request("POST", `/api/review/submissions/${id}/claim/`);
      stopExtending();
      current = { id, timer: setInterval(extend, Number(panel.dataset.extendMs || 60000)) };
      $("claim-id").textContent = id;
      $("claim-until").textContent = when(body.claim_expires_at);
      panel.hidden = false;
      show(`You claimed ${id}.`, "ok");
      loadDetail(id);
    } catch (err) {
      show(err.code === "already_claimed" ? claimedBy(err) : err.message, "error");
    }
    loadQueue();
  }

  // One file: its name, size and download link; a small text file's content, or an
  // archive's members. Names are set as text, never as markup.
  function fileView(file) {
    const link = el("a", { href: file.download_url, download: "", class: "download" }, "download");
    let inside;
    if (file.members) {
      inside = el("table", { class: "members" },
        el("thead", {}, el("tr", {}, el("th", {}, "Member"), el("th", {}, "Type"), el("th", {}, "Bytes"))),
        el("tbody", {}, ...file.members.map((m) => el("tr", {},
          el("td", {}, el("code", {}, m.name)), el("td", {}, m.type), el("td", {}, String(m.size))))));
    } else if (file.text !== null) {
      inside = el("pre", {}, file.text);
    } else {
      inside = el("p", { class: "muted" }, file.members_problem ||
        "Not shown inline (binary or larger than 64 KiB): download it.");
    }
    return el("details", { "data-file-id": String(file.id) },
      el("summary", {}, `${file.filename} · ${file.size} bytes · `, link), inside);
  }

  async function loadDetail(id) {
    try {
      const { body } = await request("GET", `/api/review/submissions/${id}/`);
      $("detail-status").textContent = body.status + (body.status_reason ? `: ${body.status_reason}` : "") +
        (body.score === null ? "" : ` (grader's score ${score(body.score)})`);
      $("detail-files").replaceChildren(...body.files.map(fileView));
      $("detail-logs").textContent = body.logs || body.error || "(no output)";
      const attempts = body.attempts.map((a) => el("li", {},
        `#${a.number} ${a.outcome}` + (a.exit_code === null ? "" : ` · exit ${a.exit_code}`) + (a.reason ? ` · ${a.reason}` : "")));
      $("detail-attempts").replaceChildren(...(attempts.length ? attempts : [el("li", { class: "muted" }, "none")]));
    } catch (err) {
      $("detail-status").textContent = err.message;
    }
  }

  async function extend() {
    if (!current) return;
    try {
      const { body } = await request("POST", `/api/review/submissions/${current.id}/extend/`);
      $("claim-until").textContent = when(body.claim_expires_at);
    } catch (err) {
      show(err.message, "error");
      stopExtending();
      panel.hidden = true;
    }
  }

  function stopExtending() {
    if (current) clearInterval(current.timer);
    current = null;
  }

  $("release").addEventListener("click", async () => {
    if (!current) return;
    const id = current.id;
    try { await request("POST", `/api/review/submissions/${id}/release/`); show(`Released ${id}.`); }
    catch (err) { show(err.message, "error"); }
    stopExtending();
    panel.hidden = true;
    loadQueue();
  });

  $("complete").addEventListener("click", async () => {
    if (!current) return;
    const id = current.id;
    const payload = { verdict: $("verdict").value, comment: $("comment").value };
    if ($("score").value !== "") payload.score = Number($("score").value);
    $("complete").disabled = true;
    try {
      await request("POST", `/api/review/submissions/${id}/complete/`, { json: payload });
      show(`Review of ${id} recorded (${payload.verdict}).`, "ok");
      stopExtending();
      panel.hidden = true;
    } catch (err) {
      show(err.message, "error");
    }
    $("complete").disabled = false;
    loadQueue();
  });

  window.addEventListener("pagehide", stopExtending);
  loadQueue();
  setInterval(loadQueue, 15000);
})();
