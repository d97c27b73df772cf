#!/usr/bin/env bash
# A single-node Slurm for the Slurm executor's tests.
#   ci/slurm-up.sh        install slurm-wlm if missing, configure, start, wait until idle
#   ci/slurm-up.sh down   stop the daemons this script started
# No munge: AuthType=auth/none and CredType=cred/none (one host, CI only).
set -euo pipefail
STATE=${WEIR_SLURM_STATE:-/tmp/weir-slurm}
CONF_DIR=/etc/slurm

if [ "${1:-}" = down ]; then
  for d in slurmd slurmctld; do
    if [ -f "$STATE/$d.pid" ]; then
      pid=$(cat "$STATE/$d.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$STATE/$d.pid"
    fi
  done
  exit 0
fi

if ! command -v slurmctld >/dev/null 2>&1; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm
fi

host=$(uname -n | cut -d. -f1)   # what slurmd calls itself (NodeName must match)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2/1024) - 512}' /proc/meminfo)
mkdir -p "$STATE/spool/ctld" "$STATE/spool/d" "$CONF_DIR"
# Never overwrite a site's own configuration.
if [ -f "$CONF_DIR/slurm.conf" ] && ! head -1 "$CONF_DIR/slurm.conf" | grep -q '^# weir ci'; then
  echo "slurm-up: $CONF_DIR/slurm.conf exists and is not ours; not touching it" >&2
  exit 1
fi
cat > "$CONF_DIR/slurm.conf" <<CONF
# weir ci: single-node Slurm written by ci/slurm-up.sh
ClusterName=weir-ci
SlurmctldHost=$host
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmdSpoolDir=$STATE/spool/d
StateSaveLocation=$STATE/spool/ctld
SlurmUser=root
SlurmdUser=root
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=3600
DefMemPerCPU=256
KillWait=2
OverTimeLimit=0
InactiveLimit=0
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
cat > "$CONF_DIR/cgroup.conf" <<CONF
CgroupPlugin=autodetect
CONF

if ! scontrol ping >/dev/null 2>&1; then
  slurmctld
fi
if ! { [ -f "$STATE/slurmd.pid" ] && kill -0 "$(cat "$STATE/slurmd.pid")" 2>/dev/null; }; then
  slurmd
fi
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
    sinfo
    exit 0
  fi
  sleep 0.2
done
echo "slurm-up: the node never became idle" >&2
sinfo >&2 || true
tail -20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
exit 1
