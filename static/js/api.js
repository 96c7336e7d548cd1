// Small client for the Yoyaku API used by the bundled pages (session auth + CSRF).
"use strict";

const Api = (() => {
  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.error) || `HTTP ${status}`);
      this.status = status;
      this.body = body || {};
      this.code = this.body.code || "";
    }
    get retryable() {
      // 5xx and network failures (status 0) are worth retrying; 4xx are final.
      return this.status === 0 || this.status >= 500;
    }
  }

  async function parse(response) {
    const text = await response.text();
    if (!text) return {};
    try {
      return JSON.parse(text);
    } catch (_) {
      return { error: text.slice(0, 200) };
    }
  }

  async function request(method, path, { json, form, headers } = {}) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...(headers || {}) } };
    if (method !== "GET") init.headers["X-CSRFToken"] = csrfToken();
    if (json !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(json);
    } else if (form !== undefined) {
      init.body = form;
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, { code: "network_error", error: "Network error: " + err.message });
    }
    const body = await parse(response);
    if (!response.ok) throw new ApiError(response.status, body);
    return { status: response.status, body, headers: response.headers };
  }

  // Upload with progress events (fetch has none): resolves like request(), rejects ApiError.
  function upload(path, form, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", path);
      xhr.withCredentials = true;
      xhr.setRequestHeader("X-CSRFToken", csrfToken());
      xhr.setRequestHeader("Accept", "application/json");
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable && onProgress) onProgress(event.loaded / event.total);
      };
      xhr.onerror = () => reject(new ApiError(0, { code: "network_error", error: "Network error during upload." }));
      xhr.onload = () => {
        let body = {};
        try { body = xhr.responseText ? JSON.parse(xhr.responseText) : {}; } catch (_) { body = { error: xhr.responseText.slice(0, 200) }; }
        if (xhr.status >= 200 && xhr.status < 300) resolve({ status: xhr.status, body });
        else reject(new ApiError(xhr.status, body));
      };
      xhr.send(form);
    });
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Retry `attempt` on 5xx / network errors: up to `retries` more tries, exponential backoff.
  async function withRetries(attempt, { retries = 3, baseDelay = 500, onRetry } = {}) {
    for (let n = 0; ; n++) {
      try {
        return await attempt(n);
      } catch (err) {
        if (!(err instanceof ApiError) || !err.retryable || n >= retries) throw err;
        const delay = baseDelay * 2 ** n;
        if (onRetry) onRetry(n + 1, delay, err);
        await sleep(delay);
      }
    }
  }

  function listOf(body, ...keys) {
    if (Array.isArray(body)) return body;
    for (const key of [...keys, "results", "items"]) if (Array.isArray(body[key])) return body[key];
    return [];
  }

  function when(value) {
    return value ? new Date(value).toLocaleString() : "";
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== undefined && value !== null) node.setAttribute(key, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
    return node;
  }

  // A score as people read it: at most 4 decimals (0.6667, not 0.6666666666666666), tiny
  // values in 3 significant digits, "" for none. The exact value goes in a title attribute.
  function score(value) {
    if (value === null || value === undefined || value === "") return "";
    const number = Number(value);
    if (!Number.isFinite(number)) return String(value);
    if (number !== 0 && Math.abs(number) < 0.001) return number.toPrecision(3);
    return String(Number(number.toFixed(4)));
  }

  // A table cell holding a score: rounded text, the exact value on hover.
  function scoreCell(value) {
    const text = score(value);
    return el("td", { class: "num", title: text && String(value) !== text ? String(value) : "" }, text);
  }

  return { ApiError, csrfToken, parse, request, upload, withRetries, sleep, listOf, when, el, score, scoreCell };
})();
