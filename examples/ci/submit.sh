#!/usr/bin/env bash
# Submit from CI once per commit, with the yoyaku client.
#
# The idempotency key is derived from the commit, so re-running the pipeline for the same
# commit (a retried job, a re-run button) never makes a second job: the client prints
# "Matched existing job ..." and follows that job instead.
#
#   YOYAKU_URL, YOYAKU_TOKEN   the server's root and a token (CI secrets)
#   SUBMISSION_DIR             what to submit (default: examples/hello)
#   YOYAKU_WAIT_TIMEOUT        seconds to wait for the grading (default 900; 0: do not wait)
#
# Exit codes are the client's: 0 completed, 3 failed or cancelled, 4 quota or cost limit (do
# not retry: wait for your jobs to finish), 5 timeout, 1 any other error.
set -euo pipefail

commit="${GITHUB_SHA:-${CI_COMMIT_SHA:-$(git rev-parse HEAD)}}"
repo="${GITHUB_REPOSITORY:-${CI_PROJECT_PATH:-local}}"
key="ci-${repo}-${commit}"
wait_timeout="${YOYAKU_WAIT_TIMEOUT:-900}"

args=(submit "${SUBMISSION_DIR:-examples/hello}" --idempotency-key "$key")
if [ "$wait_timeout" != "0" ]; then
  args+=(--wait --timeout "$wait_timeout")
fi

echo "Using idempotency key: $key" >&2
exec "${YOYAKU:-yoyaku}" "${args[@]}" "$@"
