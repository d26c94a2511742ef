#!/bin/bash
# Launch of padded do-nothing programs (`cosched submit --bcast`) on node managers in network
# namespaces, idle, under CPU load and under network load (seed 003 Figs. 2-3;
# docs/reproductions/storm-launch.md, "Network namespaces and load"). Needs root and iproute2.
# Not part of the test suite.
#
#   benches/storm-netns.sh COSCHED NODES RUNS [MB...]   # e.g. target/release/cosched 16 3 4 8 12
#
# Hosts: namespace h0 holds the machine manager and the client, h1..hN one node manager each,
# all joined by veth pairs to one bridge in the root namespace (10.213.0.0/24), as in
# crates/cli/tests/daemon_netns.rs but with a bridge for more than two hosts. Loads, each on
# every host: cpu = one busy loop per host namespace; net = a TCP flood between pairs of
# hosts (h1->h2, h3->h4, ...; a few lines of python3), so the tree's frames share the bridge
# with it. Prints one line per setting: nodes, MB, load, send, execute and total (median ms).
set -eu
bin=$(realpath "$1"); n=$2; runs=$3; shift 3
sizes=${*:-4 8 12}
tag=cs$$
dir=/tmp/cosched-netns-bench-$$
br=${tag}br
mkdir -p "$dir"
# The node managers are stopped by signals, not shut down, so their staged copies are put
# where the cleanup removes them (not /dev/shm).
export COSCHED_SCRATCH=$dir/scratch
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for i in $(seq 0 "$n"); do ip netns del "${tag}h$i" 2>/dev/null || true; done
  ip link del "$br" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap "exit 1" TERM INT
ip link add "$br" type bridge
ip link set "$br" up
for i in $(seq 0 "$n"); do
  ns=${tag}h$i
  ip netns add "$ns"
  ip link add "${tag}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${tag}v$i" master "$br" up
  ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done
at() { local h=$1; shift; ip netns exec "${tag}h$h" "$@"; }
# For `bg h CMD &`: the background subshell becomes CMD itself (`ip netns exec` execs too), so
# $! is the process to kill, not a subshell whose child would outlive it.
bg() { local h=$1; shift; exec ip netns exec "${tag}h$h" "$@"; }
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/key"
mm=10.213.0.1:7070
conn=(--mm "$mm" --key-file "$dir/key")
bg 0 "$bin" mm --listen "$mm" --nodes "$n" --pes 1 --fanout 8 --state-dir "$dir" \
  --key-file "$dir/key" >"$dir/mm.log" 2>&1 &
pids+=($!)
for i in $(seq 1 "$n"); do
  bg "$i" "$bin" nm --mm "$mm" --name "h$i" --pes 1 --workdir "$dir/h$i" \
    --key-file "$dir/key" >"$dir/nm$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  up=$(at 0 "$bin" status --json "${conn[@]}" 2>/dev/null | grep -o '"state": *"up"' | wc -l || true)
  [ "$up" -ge "$n" ] && break
  sleep 0.2
done
[ "$up" -ge "$n" ] || { echo "only $up of $n node managers registered" >&2; tail "$dir/mm.log" >&2; exit 1; }

# The padded program of bench::padded_program: a shell script that prints its start time.
for mb in $sizes; do
  f=$dir/prog$mb
  printf '#!/bin/sh\nexec date +%%s%%N\n#' > "$f"
  head -c $((mb * 1000000 - $(stat -c %s "$f"))) /dev/zero | tr '\0' x >> "$f"
  chmod 755 "$f"
done

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# One launch: prints "send_ms total_ms": the broadcast's time as `submit` reports it, and from
# the submit command's start to the last rank's start (both clocks are this host's).
launch() {
  local mb=$1 t0 out id last
  t0=$(date +%s%N)
  out=$(at 0 "$bin" submit -n "$n" --bcast "$dir/prog$mb" "${conn[@]}" 2>&1)
  id=$(echo "$out" | tail -n 1)
  at 0 "$bin" wait "$id" "${conn[@]}" >/dev/null
  last=0
  for r in $(seq 0 $((n - 1))); do
    s=$(at 0 "$bin" output "$id" --rank "$r" "${conn[@]}" 2>/dev/null | tr -d '\n')
    [ "${s:-0}" -gt "$last" ] && last=$s
  done
  send=$(echo "$out" | sed -n 's/.* in \([0-9.]*\) ms$/\1/p')
  echo "$send $(( (last - t0) / 1000000 ))"
}

loadpids=()
start_load() {
  case $1 in
  cpu)
    for i in $(seq 1 "$n"); do bg "$i" sh -c 'while :; do :; done' & loadpids+=($!); done ;;
  net)
    for i in $(seq 1 2 "$n"); do
      j=$((i + 1)); [ "$j" -le "$n" ] || break
      bg "$j" python3 -c 'import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("", 5999)); s.listen(1)
c,_=s.accept()
while c.recv(1<<16): pass' & loadpids+=($!)
      sleep 0.3
      bg "$i" python3 -c "import socket
s=socket.create_connection(('10.213.0.$((j + 1))', 5999)); b=bytes(1<<16)
while True: s.sendall(b)" & loadpids+=($!)
    done ;;
  esac
  sleep 0.5
}
stop_load() {
  local p
  # `ip netns exec` execs its command, so each pid is the load process itself.
  for p in "${loadpids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${loadpids[@]}"; do wait "$p" 2>/dev/null || true; done
  loadpids=()
}

echo "nodes mb load send_ms execute_ms total_ms runs loadavg"
for load in idle cpu net; do
  start_load "$load"
  for mb in $sizes; do
    launch "$mb" >/dev/null   # warm-up: page cache, the tree's connections
    : > "$dir/t"
    for _ in $(seq "$runs"); do launch "$mb" >> "$dir/t"; done
    s=$(cut -d' ' -f1 "$dir/t" | median)
    t=$(cut -d' ' -f2 "$dir/t" | median)
    echo "$n $mb $load $s $(awk "BEGIN {print $t - $s}") $t $runs $(cut -d' ' -f1 /proc/loadavg)"
  done
  stop_load
done
