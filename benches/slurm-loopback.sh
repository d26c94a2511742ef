#!/bin/sh
# Slurm (Debian's slurm-wlm) on loopback, for comparing launches with cosched's
# (docs/reproductions/storm-launch.md). Not part of the test suite.
#
#   benches/slurm-loopback.sh up N DIR     # slurmctld + N slurmd (n1..nN) on 127.0.0.1
#   benches/slurm-loopback.sh bench N DIR FILE...  # srun and sbcast+srun, timed
#   benches/slurm-loopback.sh down DIR
#
# Several slurmd on one host: every node gets NodeHostname=localhost and its own Port=, and
# each slurmd is started with -N NAME (see the doc for what worked with this build).
# Authentication: a private munged (its own key and socket in DIR), as Slurm normally runs.
# Ports: slurmctld on $SLURM_LOOPBACK_CTLD_PORT (default 16817), node K on
# $SLURM_LOOPBACK_NODE_PORT + K (default 17000 + K), so that two such clusters can run at once.
set -eu
ctld_port=${SLURM_LOOPBACK_CTLD_PORT:-16817}
node_port=${SLURM_LOOPBACK_NODE_PORT:-17000}
cmd=$1; shift
case $cmd in
up)
  n=$1; dir=$2
  mkdir -p "$dir/etc" "$dir/state" "$dir/log" "$dir/spool" "$dir/munge" "$dir/bcast"
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/key" ] || mungekey -c -k "$dir/munge/key" 2>/dev/null || dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge/key"
  munged -f --key-file="$dir/munge/key" --socket="$dir/munge/sock" \
    --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" --num-threads=4
  cat > "$dir/etc/slurm.conf" <<CONF
ClusterName=loop
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdTimeout=300
TreeWidth=8
NodeName=n[1-$n] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 RealMemory=100 Port=[$((node_port+1))-$((node_port+n))]
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/etc/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  i=1
  while [ $i -le "$n" ]; do
    mkdir -p "$dir/spool/n$i"
    slurmd -f "$SLURM_CONF" -N "n$i"
    i=$((i+1))
  done
  # Wait until every node is idle.
  t=0
  while [ "$(sinfo -h -t idle -o %D 2>/dev/null | awk '{s+=$1} END {print s+0}')" -lt "$n" ]; do
    sleep 1; t=$((t+1))
    if [ $t -gt 120 ]; then echo "slurm: nodes not idle after 120 s" >&2; sinfo >&2; exit 1; fi
  done
  echo "slurm up: $n nodes"
  ;;
bench)
  n=$1; dir=$2; shift 2
  export SLURM_CONF="$dir/etc/slurm.conf"
  ns() { date +%s%N; }
  # Each run starts with every node idle: a node stays COMPLETING a moment after a job, and a
  # run that queued behind that would time the previous job's cleanup, not a launch.
  idle() {
    while [ "$(sinfo -h -t idle -o %D 2>/dev/null | awk '{s+=$1} END {print s+0}')" -lt "$n" ]; do
      sleep 0.05
    done
  }
  # srun of a trivial job on every node (the program already there).
  for r in 0 1 2 3; do
    idle
    t0=$(ns); srun -N "$n" -n "$n" /bin/true; t1=$(ns)
    echo "srun nodes=$n run=$r ms=$(( (t1-t0)/1000000 ))"
  done
  # sbcast + srun of each padded program: as a batch of one allocation (salloc), so the
  # broadcast runs inside the job as Slurm requires.
  for f in "$@"; do
    for r in 0 1 2 3; do
      idle
      t0=$(ns)
      salloc -Q -N "$n" -n "$n" sh -c "sbcast -f '$f' '/tmp/slurm-bcast-\$SLURM_JOB_ID' && srun '/tmp/slurm-bcast-\$SLURM_JOB_ID'" >/dev/null
      t1=$(ns)
      echo "sbcast+srun nodes=$n file=$(basename "$f") run=$r ms=$(( (t1-t0)/1000000 ))"
    done
  done
  ;;
down)
  dir=$1
  for p in "$dir"/spool/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
  done
  ;;
esac
