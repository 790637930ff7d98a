#!/usr/bin/env bash
# Eight ranks (or any number) uploaded as one run, from the first byte sent
# to the cross-rank summary (issue 44, item 2): `server/benches/ranks.sh
# FILE...` (KINETOSCOPE_BIN: the binary, default target/serve/kinetoscope;
# ROUNDS: default 3). Each round starts the real `kinetoscope serve`
# (embedded: SQLite, a blob folder, its one worker) on a fresh data folder,
# sends the files with `kinetoscope upload` (one multipart request, as a
# user does; with RATE=110M, with curl over a link of that many bytes a
# second), and polls the run every 20 ms until it is done; beside it, in
# the same round, `zstd -dc` of every file one after another, the baseline.
# Prints both and their ratio per round.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${KINETOSCOPE_BIN:-target/serve/kinetoscope}
PORT=${PORT:-18932}
ROUNDS=${ROUNDS:-3}
[ $# -gt 0 ] || { echo "usage: $0 FILE..." >&2; exit 2; }
now() { date +%s.%N; }
for round in $(seq "$ROUNDS"); do
  t0=$(now)
  for f in "$@"; do zstd -qdc "$f" >/dev/null; done
  base=$(echo "$(now) - $t0" | bc)
  DATA=$(mktemp -d "${TMPDIR:-/tmp}/kinetoscope-ranks.XXXXXX")
  KINETOSCOPE_DATA=$DATA KINETOSCOPE_LISTEN=127.0.0.1:$PORT "$BIN" serve >"$DATA.log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; rm -rf "$DATA" "$DATA.log"' EXIT
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  t0=$(now)
  if [ -n "${RATE:-}" ]; then
    # A link of RATE bytes a second (curl's --limit-rate: 110M is about a
    # gigabit), the form as curl sends it.
    form=(); for f in "$@"; do form+=(-F "file=@$f"); done
    id=$(curl -fsS --limit-rate "$RATE" "${form[@]}" "http://127.0.0.1:$PORT/api/runs" |
      grep -o '"id":"[^"]*"' | cut -d'"' -f4)
  else
    url=$("$BIN" upload --server "http://127.0.0.1:$PORT" "$@" 2>/dev/null)
    id=${url##*/}
  fi
  t1=$(now)
  while :; do
    # The run's own status is the first in its JSON (its ranks' come after).
    status=$(curl -fsS "http://127.0.0.1:$PORT/api/runs/$id" | grep -o '"status":"[a-z]*"' | head -1 | cut -d'"' -f4)
    case $status in done|failed) break ;; esac
    sleep 0.02
  done
  t2=$(now)
  ranks=$(curl -fsS "http://127.0.0.1:$PORT/api/runs/$id/ranks" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["ranks"]))')
  kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  rm -rf "$DATA" "$DATA.log"
  [ "$status" = done ] || { echo "round $round: the run failed" >&2; exit 1; }
  printf 'round %d: zstd -d of %d files %.2f s; upload %.2f s, upload to the cross-rank summary (%s ranks) %.2f s: %.2fx\n' \
    "$round" $# "$base" "$(echo "$t1 - $t0" | bc)" "$ranks" "$(echo "$t2 - $t0" | bc)" "$(echo "($t2 - $t0) / $base" | bc -l)"
done
