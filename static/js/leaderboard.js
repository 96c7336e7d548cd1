// /leaderboard/: best completed score per user, per question and skill.
"use strict";

(() => {
  const { request, listOf, when, el, scoreCell } = Api;
  const form = document.getElementById("board-form");
  const message = document.getElementById("message");

  async function load() {
    const params = new URLSearchParams();
    for (const name of ["question_id", "skill"]) {
      const value = document.getElementById(name).value.trim();
      if (value) params.set(name, value);
    }
    history.replaceState(null, "", "?" + params.toString());
    try {
      const { body } = await request("GET", "/api/leaderboard/?" + params.toString());
      const rows = listOf(body, "rows", "leaderboard");
      document.querySelector("#board tbody").replaceChildren(...rows.map((row) => el("tr", {},
        el("td", {}, String(row.rank)),
        el("td", {}, row.user ? row.user.username : ""),
        scoreCell(row.score),
        el("td", {}, el("code", {}, (row.submission_id || "").slice(0, 12))),
        el("td", {}, when(row.completed_at)),
      )));
      message.textContent = rows.length ? "" : "No completed submissions yet.";
      message.className = "muted";
    } catch (err) {
      message.textContent = err.message;
      message.className = "error";
    }
  }
  form.addEventListener("submit", (event) => { event.preventDefault(); load(); });
  load();
})();
