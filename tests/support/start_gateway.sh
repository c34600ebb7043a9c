# Sourced by test scripts: starts `areal-host serve` on a free loopback port.
#   start_gateway HOST ADMIN_KEY LOG [serve args...]
# Sets url (its base URL) and appends its pid to the caller's pids array;
# exits the script with the log when it does not come up. Its durable state
# goes next to the log (LOG.state) unless the args set gateway.state_dir:
# tests run side by side, and each gateway needs a state dir of its own
# (routers, given gateway.workers, keep none).
# It waits up to 120 s: a gateway in front of a real server (vLLM on CPU)
# probes it before it listens, and CI runs other tests beside it on 2 cores;
# a gateway that dies is reported at once.
start_gateway() {
  local bin=$1 key=$2 glog=$3
  shift 3
  local state=("gateway.state_dir=$glog.state")
  [[ " $* " == *" gateway.workers="* ]] && state=()  # a router records nothing itself
  "$bin" serve --port 0 --admin-key "$key" "${state[@]}" "$@" 2> "$glog" &
  pids+=($!)
  url=""
  for _ in $(seq 1200); do
    url=$(grep -o 'gateway listening at http://[0-9.:]*' "$glog" | sed 's/gateway listening at //') && [ -n "$url" ] && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$glog"; exit 1; }
    sleep 0.1
  done
  echo "gateway did not start"; cat "$glog"; exit 1
}
