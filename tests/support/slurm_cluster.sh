# Sourced by test scripts: a real one-node Slurm cluster on localhost
# (Debian's slurmctld, slurmd and munge), with its state, spool, logs and
# slurm.conf in a directory of its own, for tests of `areal-host launch`.
#   slurm_cluster_start DIR   starts munged (when none runs), slurmctld and
#                             slurmd; exports SLURM_CONF; waits until the
#                             node is idle
#   slurm_cluster_stop        cancels every job, stops the daemons it
#                             started, and fails if any Slurm process is left
# Runs as root (slurmd must); the caller traps slurm_cluster_stop on EXIT.
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

slurm_cluster_start() {
  SLURM_TEST_DIR=$1
  local d=$SLURM_TEST_DIR
  for tool in slurmctld slurmd munged mungekey sbatch srun squeue scontrol scancel sinfo; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool is not installed (scripts/setup.sh installs slurmctld slurmd slurm-client munge)"; return 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "FAIL: the Slurm test cluster needs root (slurmd)"; return 1; }
  rm -rf "$d" && mkdir -p "$d/state" "$d/spool" "$d/log"
  # The node offers more CPUs than this machine has (config_overrides) so a
  # job with 2 ranks and a server fits on a 2-core CI machine.
  cat > "$d/slurm.conf" <<CONF
ClusterName=areal-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=5
MinJobAge=600
SlurmdParameters=config_overrides
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
NodeName=localhost NodeHostname=$(hostname) CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$d/slurm.conf
  SLURM_STARTED_MUNGE=0
  if ! pgrep -x munged >/dev/null; then
    install -d -o munge -g munge -m 0755 /run/munge
    [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey -c
    env -u AREAL_TEST_MARK runuser -u munge -- munged || { echo "FAIL: munged did not start"; return 1; }
    SLURM_STARTED_MUNGE=1
  fi
  # The daemons are the cluster's, not the test's: they do not carry its process mark.
  env -u AREAL_TEST_MARK slurmctld -c -i -f "$SLURM_CONF" || { echo "FAIL: slurmctld did not start"; cat "$d/log/slurmctld.log"; return 1; }
  for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
  env -u AREAL_TEST_MARK slurmd -c -f "$SLURM_CONF" -N localhost || { echo "FAIL: slurmd did not start"; cat "$d/log/slurmd.log"; return 1; }
  for _ in $(seq 150); do
    state=$(sinfo -h -n localhost -o %t 2>/dev/null || true)
    [ "$state" = idle ] && { echo "slurm: one-node cluster up (SLURM_CONF=$SLURM_CONF)"; return 0; }
    sleep 0.2
  done
  echo "FAIL: the Slurm node did not become idle (state '$state')"; tail -20 "$d/log/slurmctld.log" "$d/log/slurmd.log"
  return 1
}

slurm_cluster_stop() {
  local d=${SLURM_TEST_DIR:-} left=0
  [ -n "$d" ] && [ -f "$d/slurm.conf" ] || return 0
  scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
  for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  for pidfile in "$d/slurmd.pid" "$d/slurmctld.pid"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  [ "${SLURM_STARTED_MUNGE:-0}" = 1 ] && { runuser -u munge -- munged -s 2>/dev/null || pkill -x munged || true; }
  sleep 0.5
  for daemon in slurmctld slurmd slurmstepd; do
    if pgrep -a -x "$daemon"; then echo "FAIL: $daemon is left"; left=1; fi
  done
  unset SLURM_CONF
  SLURM_TEST_DIR=
  return $left
}

# slurm_ranks_trained RUN STEPS: both train ranks of a 2-rank run (srun
# steps, whose --label puts the task's rank first in RUN/logs/ranks.log)
# logged every one of STEPS steps.
slurm_ranks_trained() {
  local run=$1 steps=$2 r n
  for r in 0 1; do
    n=$(grep -c "^$r: .*\[train-rank\] rank $r step [0-9]* " "$run/logs/ranks.log" || true)
    [ "$n" = "$steps" ] || { echo "FAIL: rank $r trained $n steps, not $steps"; return 1; }
  done
}
