#!/usr/bin/env bash
# Streams one big trace through the service and reports what it cost
# (`make bench-big-upload`, BIG_TRACE=FILE; default: the 300-step trace
# `make bench-scale` generates). The real `kinetoscope serve` (embedded:
# SQLite, a blob folder, one worker in the same process) on a fresh data
# folder; the file goes up with `curl -T` (streamed from disk, never held
# by curl); then the run is polled until it is done. Prints the upload time,
# the time to done, and the server's RSS before, at the end of the upload
# and at its peak (VmHWM: the upload and the analysis together), with the
# size of the file and its events.
set -euo pipefail
cd "$(dirname "$0")/../.."
FILE=${BIG_TRACE:-target/bench/decode-v2-300x78.json.zst}
BIN=${KINETOSCOPE_BIN:-target/release/kinetoscope}
PORT=${PORT:-18931}
[ -f "$FILE" ] || { echo "no $FILE: run make bench-scale first, or set BIG_TRACE" >&2; exit 2; }
[ -x "$BIN" ] || cargo build --release -p server --locked
DATA=$(mktemp -d "${TMPDIR:-/tmp}/kinetoscope-big.XXXXXX")
KINETOSCOPE_DATA=$DATA KINETOSCOPE_LISTEN=127.0.0.1:$PORT "$BIN" serve >"$DATA.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$DATA" "$DATA.log"' EXIT
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
rss() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$pid/status"; }
before=$(rss VmRSS)
t0=$(date +%s.%N)
resp=$(curl -fsS -X POST -T "$FILE" -H 'Content-Type: application/octet-stream' \
  "http://127.0.0.1:$PORT/api/runs?name=big")
t1=$(date +%s.%N)
after_upload=$(rss VmRSS)
id=$(printf '%s' "$resp" | sed -E 's/.*"id":"([^"]+)".*/\1/')
status=queued
while :; do
  status=$(curl -fsS "http://127.0.0.1:$PORT/api/runs/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
  case $status in done|failed) break ;; esac
  sleep 0.2
done
t2=$(date +%s.%N)
[ "$status" = done ] || { echo "the run failed:"; curl -fsS "http://127.0.0.1:$PORT/api/runs/$id"; exit 1; }
events=$(curl -fsS "http://127.0.0.1:$PORT/api/runs/$id/summary" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["trace"]["events"])')
printf 'file %s: %.1f MB, %s events\n' "$FILE" "$(stat -c %s "$FILE" | awk '{print $1/1e6}')" "$events"
printf 'upload (streamed over loopback): %.2f s; upload to done: %.2f s\n' \
  "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t0" | bc)"
printf 'server RSS: %s MB before, %s MB after the upload, peak %s MB (upload and analysis)\n' \
  "$before" "$after_upload" "$(rss VmHWM)"
