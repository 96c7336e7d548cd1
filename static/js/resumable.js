// Resumable uploads from the pages: the IETF draft "Resumable Uploads for HTTP" (interop
// version 8) over fetch, with the session cookie and CSRF token every other API call sends.
//
// create (POST /api/uploads/, `Upload-Complete: ?0`, `Upload-Length`) → slices appended with
// PATCH (`application/partial-upload`, `Upload-Offset`, `Upload-Complete: ?1` on the last) →
// the finished upload's id, which the page then attaches to its submission. A network error or
// a 5xx waits (exponential backoff), asks HEAD where the stored bytes end and continues from
// there; a 409 continues from the offset the server names. Progress counts the bytes the
// server says it stored. cancel() stops the request in flight and deletes the upload.
"use strict";

const Resumable = (() => {
  const { ApiError, csrfToken, parse } = Api;
  const INTEROP_VERSION = "8";
  const APPEND_TYPE = "application/partial-upload";

  class UploadCancelled extends Error {
    constructor() {
      super("Upload cancelled.");
      this.cancelled = true;
    }
  }

  function offsetOf(response, body, fallback) {
    const named = body && body["expected-offset"] !== undefined && body["expected-offset"] !== null
      ? body["expected-offset"]
      : response.headers.get("Upload-Offset");
    const value = Number(named);
    return named !== null && named !== "" && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
  }

  class Upload {
    // options: sliceBytes, baseDelay (ms), maxDelay (ms), retries (failures in a row before
    // giving up), onProgress(storedBytes, totalBytes), onRetry(n, delayMs, error).
    constructor(file, options = {}) {
      this.file = file;
      this.sliceBytes = Math.max(1, Math.floor(Number(options.sliceBytes) || 8 * 1024 * 1024));
      this.baseDelay = Number(options.baseDelay ?? 500);
      this.maxDelay = Number(options.maxDelay ?? 15000);
      this.retries = Number(options.retries ?? 8);
      this.onProgress = options.onProgress || (() => {});
      this.onRetry = options.onRetry || (() => {});
      this.uploadId = null;
      this.url = null;
      this.offset = 0;
      this.complete = false;
      this.cancelled = false;
      this.controller = new AbortController();
    }

    async call(method, url, headers = {}, body = undefined) {
      if (this.cancelled) throw new UploadCancelled();
      const init = {
        method,
        credentials: "same-origin",
        signal: this.controller.signal,
        headers: {
          Accept: "application/json",
          "Upload-Draft-Interop-Version": INTEROP_VERSION,
          "X-CSRFToken": csrfToken(),
          ...headers,
        },
      };
      if (body !== undefined) init.body = body;
      try {
        return await fetch(url, init);
      } catch (err) {
        if (this.cancelled) throw new UploadCancelled();
        return { networkError: new ApiError(0, { code: "network_error", error: "Network error: " + err.message }) };
      }
    }

    // Waits `ms`, or less when cancelled.
    pause(ms) {
      return new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        this.controller.signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
      });
    }

    stored(offset) {
      this.offset = Math.min(offset, this.file.size);
      this.onProgress(this.offset, this.file.size);
    }

    async create() {
      const headers = { "Upload-Complete": "?0", "Upload-Length": String(this.file.size) };
      for (let failures = 0; ; ) {
        const response = await this.call("POST", "/api/uploads/", headers);
        const error = response.networkError || null;
        const body = error ? {} : await parse(response);
        if (!error && response.ok) {
          this.uploadId = body.upload_id;
          this.url = `/api/uploads/${body.upload_id}/`;
          this.stored(offsetOf(response, null, 0));
          return;
        }
        const failure = error || new ApiError(response.status, body);
        if (!failure.retryable) throw failure;
        failures = await this.backoff(failures, failure);
      }
    }

    // One more failure in a row: wait, or give up after `retries`. Returns the new count.
    async backoff(failures, error) {
      failures += 1;
      if (failures > this.retries) throw error;
      const delay = Math.min(this.maxDelay, this.baseDelay * 2 ** (failures - 1));
      this.onRetry(failures, delay, error);
      await this.pause(delay);
      if (this.cancelled) throw new UploadCancelled();
      return failures;
    }

    // Where the server's stored bytes end (HEAD). False when it could not be asked.
    async resync() {
      const response = await this.call("HEAD", this.url);
      if (response.networkError || !response.ok) {
        if (response.status && response.status < 500) throw new ApiError(response.status, {});
        return false;
      }
      this.complete = response.headers.get("Upload-Complete") === "?1";
      this.stored(offsetOf(response, null, this.offset));
      return true;
    }

    // Sends the whole file; resolves with the finished upload's id.
    async send() {
      if (!this.url) await this.create();
      const size = this.file.size;
      let failures = 0;
      while (!this.complete) {
        const end = Math.min(this.offset + this.sliceBytes, size);
        const last = end === size;
        const response = await this.call(
          "PATCH",
          this.url,
          { "Content-Type": APPEND_TYPE, "Upload-Offset": String(this.offset), "Upload-Complete": last ? "?1" : "?0" },
          this.file.slice(this.offset, end),
        );
        if (!response.networkError && response.ok) {
          this.stored(offsetOf(response, null, end));
          this.complete = last && response.headers.get("Upload-Complete") !== "?0";
          failures = 0;
          continue;
        }
        const body = response.networkError ? {} : await parse(response);
        if (!response.networkError && response.status === 409) {
          const expected = offsetOf(response, body, this.offset);
          if (expected !== this.offset) {
            // The server holds other bytes than this page thought: continue from its offset.
            failures += 1;
            if (failures > this.retries) throw new ApiError(409, body);
            this.stored(expected);
            continue;
          }
          // Another request still appends at this offset (one cut off a moment ago): wait.
          failures = await this.backoff(failures, new ApiError(409, body));
          continue;
        }
        const error = response.networkError || new ApiError(response.status, body);
        if (!error.retryable) throw error;
        failures = await this.backoff(failures, error);
        await this.resync();
      }
      return this.uploadId;
    }

    // Stops the request in flight and deletes the upload (its stored bytes go).
    async cancel() {
      this.cancelled = true;
      this.controller.abort();
      if (!this.url) return;
      try {
        await fetch(this.url, {
          method: "DELETE",
          credentials: "same-origin",
          headers: { Accept: "application/json", "Upload-Draft-Interop-Version": INTEROP_VERSION, "X-CSRFToken": csrfToken() },
        });
      } catch (_) {
        // The upload expires on its own (UPLOAD_EXPIRY_HOURS).
      }
    }
  }

  return { Upload, UploadCancelled };
})();
