#!/usr/bin/env bash
# A real SLURM cluster on this one machine, for the launcher cells and the cluster executor:
# munged, slurmctld and one slurmd per node, every node a name of its own on a loopback address
# of its own (xh-node1 on 127.0.77.1, ...), each slurmd started with `-N NAME` on its own port.
#
#   ci/cluster.sh start [--network loopback|namespaces]
#                          install the OS packages if missing, write the configuration, start the
#                          daemons and wait until sinfo shows every node idle (a running cluster is
#                          left as it is; one of the other --network is refused)
#   ci/cluster.sh stop     stop every daemon it started, cancel every job, leave no process behind
#   ci/cluster.sh status   the daemons and sinfo; exit 0 only when every node answers
#   ci/cluster.sh env      the line that points a shell at this cluster (eval "$(ci/cluster.sh env)")
#
# Everything lives under $XHARNESS_CLUSTER_DIR (default /tmp/xharness-cluster): slurm.conf, the
# controller's state, each node's spool and log. Clients find it through SLURM_CONF, which `env`
# prints; nothing is written to /etc/slurm. The node names resolve through /etc/hosts, where
# `start` adds one line per node (JAX's SLURM detection connects to the first node's name) and
# `stop` removes them. Needs root (the daemons run as root, munged as its own user).
#
# With --network namespaces (or XHARNESS_CLUSTER_NETWORK=namespaces) every node is a host of its
# own instead: a network and UTS namespace of a fabric made and held by harness.network.held
# (addresses from 198.18.0.0/15, by the harness's one address plan), whose hostname is the node's
# name, and slurmctld runs on one more host of that fabric, xh-ctld, which is also where the
# cluster's clients run: `env` puts a directory first on PATH whose srun, sinfo, scancel... run in
# xh-ctld's namespace. So srun's ranks, JAX's coordinator and gloo talk over links that a nemesis
# can cut, and the root namespace gets no link, route or /etc/hosts line. `stop` removes the
# fabric with every process in it. The mode a cluster was started in is kept in $DIR/network.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

DIR=${XHARNESS_CLUSTER_DIR:-/tmp/xharness-cluster}
NODES=${XHARNESS_CLUSTER_NODES:-2}
CPUS=${XHARNESS_CLUSTER_CPUS:-4}        # per node; the nodes share this machine's cores
CTLD_PORT=${XHARNESS_CLUSTER_PORT:-16817}
CONF=$DIR/slurm.conf
HOSTS_TAG="# xharness-cluster $DIR"
NETWORK=${XHARNESS_CLUSTER_NETWORK:-}  # "": as the running cluster, else loopback
PYTHON=${XHARNESS_PYTHON:-$ROOT/.venv/bin/python}
PLAN=$DIR/fabric.json      # the held fabric's plan (namespaces mode)
CTLD_NAME=xh-ctld          # the controller's (and the clients') host in namespaces mode
CLIENTS="srun sbatch salloc sinfo squeue scontrol scancel sacct sattach sstat"

node_name() { echo "xh-node$1"; }
node_addr() {
  if [ "$NETWORK" = namespaces ]; then fabric_field "$(node_name "$1")" 3; else echo "127.0.77.$1"; fi
}

# namespaces mode: field 2 (namespace) or 3 (address) of host $1 of the held fabric
fabric_field() { held hosts --plan "$PLAN" | awk -v n="$1" -v f="$2" '$1 == n {print $f}'; }
held() { (cd "$ROOT" && "$PYTHON" -m harness.network.held "$@"); }
# a cluster client (sinfo, scancel) run where the controller can be reached, bounded
client() {
  local tool=$1; shift
  [ "$NETWORK" = namespaces ] && [ -x "$DIR/bin/$tool" ] && tool=$DIR/bin/$tool
  SLURM_CONF=$CONF timeout 10 "$tool" "$@"
}

say() { echo "cluster: $*" >&2; }

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  command -v mpirun >/dev/null || missing+=(openmpi-bin)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "missing ${missing[*]}: install them (apt-get install ${missing[*]}) as root"; exit 3
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

write_config() {
  mkdir -p "$DIR/ctld" "$DIR/spool" "$DIR/log"
  local host ctld; host=$(hostname -s); ctld="$host(127.0.0.1)"
  if [ "$NETWORK" = namespaces ]; then ctld="$CTLD_NAME($(fabric_field "$CTLD_NAME" 3))"; fi
  {
    echo "ClusterName=xharness"
    echo "SlurmctldHost=$ctld"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "StateSaveLocation=$DIR/ctld"
    echo "SlurmdSpoolDir=$DIR/spool/%n"
    echo "SlurmctldPidFile=$DIR/slurmctld.pid"
    echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/linux"
    echo "JobAcctGatherFrequency=1"
    # a job over its --mem is killed and ends OUT_OF_MEMORY (no cgroups in a container)
    echo "JobAcctGatherParams=OverMemoryKill"
    # a job of the urgent partition preempts the debug partition's, which go back to the queue
    echo "PreemptType=preempt/partition_prio"
    echo "PreemptMode=REQUEUE"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU_Memory"
    echo "DefMemPerCPU=2000"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "SlurmdTimeout=10"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    # a step whose processes outlive SIGKILL for UnkillableStepTimeout (60 s) drains its node
    # ("Kill task failed"); what was still running then is listed in log/unkillable.log
    echo "UnkillableStepProgram=$DIR/unkillable.sh"
    echo "MinJobAge=300"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "SchedulerType=sched/backfill"
    echo "SchedulerParameters=defer_batch"
    for i in $(seq 1 "$NODES"); do
      [ "$NETWORK" = namespaces ] && host=$(node_name "$i")  # each node a host of its own
      echo "NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") NodeHostname=$host Port=$((CTLD_PORT + i)) CPUs=$CPUS RealMemory=$((CPUS * 2000)) State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1"
    echo "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2 PreemptMode=OFF"
  } > "$CONF.new"
  mv "$CONF.new" "$CONF"
  cat > "$DIR/unkillable.sh" <<SCRIPT
#!/bin/sh
{ echo "== \$(date '+%FT%T') job \${SLURM_JOB_ID:-?} step \${SLURM_STEP_ID:-?} on \$(hostname): its processes did not end"
  ps -eo pid,ppid,pgid,stat,wchan:24,etimes,args --sort=pid; } >> "$DIR/log/unkillable.log" 2>&1
SCRIPT
  chmod +x "$DIR/unkillable.sh"
}

add_hosts() {
  sed -i "\\|$HOSTS_TAG\$|d" /etc/hosts
  for i in $(seq 1 "$NODES"); do
    echo "$(node_addr "$i") $(node_name "$i") $HOSTS_TAG" >> /etc/hosts
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# namespaces mode: the fabric, held by a process of its own until `stop`, and the clients' wrappers
start_fabric() {
  local names="" i
  for i in $(seq 1 "$NODES"); do names+="$(node_name "$i"),"; done
  if ! pid_alive "$DIR/fabric.pid"; then
    rm -f "$PLAN"
    setsid "$PYTHON" -m harness.network.held up --names "$names$CTLD_NAME" --plan "$PLAN" \
      </dev/null >"$DIR/log/fabric.log" 2>&1 &
    echo $! > "$DIR/fabric.pid"
  fi
  for _ in $(seq 100); do [ -s "$PLAN" ] && break; sleep 0.1; done
  [ -s "$PLAN" ] || { say "the fabric was not made:"; cat "$DIR/log/fabric.log" >&2; exit 1; }
  local ns tool path; ns=$(fabric_field "$CTLD_NAME" 2)
  mkdir -p "$DIR/bin"
  for tool in $CLIENTS; do
    path=$(PATH=${PATH//$DIR\/bin:/} command -v "$tool") || continue
    printf '#!/bin/sh\n# %s as the host %s of the cluster'"'"'s fabric (ci/cluster.sh)\nexec ip netns exec %s %s "$@"\n' \
      "$tool" "$CTLD_NAME" "$ns" "$path" > "$DIR/bin/$tool"
    chmod +x "$DIR/bin/$tool"
  done
}

stop_fabric() {
  if pid_alive "$DIR/fabric.pid"; then
    local p; p=$(cat "$DIR/fabric.pid")
    kill "$p" 2>/dev/null || true  # it removes the fabric and every process in it
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$DIR/bin" "$DIR/fabric.pid" "$PLAN" "$DIR/network"
}

# a daemon of host $1: as that host of the fabric, or here. `ip netns exec` mounts a fresh /sys,
# without the cgroup hierarchies under /sys/fs/cgroup that slurmd's cgroup plugin needs even
# with proctrack/linuxproc ("No filesystem mounted on /sys/fs/cgroup"), so the daemon's mount
# namespace gets them again, mounted as the machine's init has them (same hierarchies).
CGROUPS='if grep -q " /sys/fs/cgroup " /proc/1/mounts; then
  mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
  awk '"'"'$2 ~ "^/sys/fs/cgroup/" {print $3, $2, $4}'"'"' /proc/1/mounts | while read -r type dir opts; do
    mkdir -p "$dir" && mount -t "$type" -o "$opts" "$type" "$dir"
  done
fi
exec "$@"'
on_host() {
  local name=$1; shift
  if [ "$NETWORK" = namespaces ]; then held exec --plan "$PLAN" "$name" -- sh -c "$CGROUPS" sh "$@"; else "$@"; fi
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge /etc/munge/munge.key 2>/dev/null || true
  chmod 0755 /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; }
  chmod 0400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  say "munged did not answer"; exit 1
}

start() {
  install_packages
  local running; running=$(cat "$DIR/network" 2>/dev/null || echo loopback)
  if pid_alive "$DIR/slurmctld.pid"; then  # a start that names no mode leaves a running one as it is
    if [ -n "$NETWORK" ] && [ "$running" != "$NETWORK" ]; then
      say "running with --network $running, not $NETWORK: stop it first (bash ci/cluster.sh stop)"; exit 2
    fi
    NETWORK=$running
  fi
  NETWORK=${NETWORK:-loopback}
  if status >/dev/null 2>&1; then say "already running ($CONF)"; return 0; fi
  mkdir -p "$DIR/log"
  echo "$NETWORK" > "$DIR/network"
  if [ "$NETWORK" = namespaces ]; then start_fabric; fi
  write_config
  [ "$NETWORK" = namespaces ] || add_hosts
  start_munge
  export SLURM_CONF=$CONF
  # -c: a clean start, no job or node state recovered from a run that did not stop (a killed job
  # would hold its nodes, a drained node stay drained)
  pid_alive "$DIR/slurmctld.pid" || on_host "$CTLD_NAME" /usr/sbin/slurmctld -c -f "$CONF"
  for i in $(seq 1 "$NODES"); do
    pid_alive "$DIR/slurmd-$(node_name "$i").pid" || on_host "$(node_name "$i")" /usr/sbin/slurmd -f "$CONF" -N "$(node_name "$i")"
  done
  for _ in $(seq 300); do
    if status >/dev/null 2>&1; then say "up: $NODES nodes idle ($CONF)"; return 0; fi
    sleep 0.2
  done
  say "the nodes did not come up; sinfo says:"; client sinfo -N >&2 || true
  tail -n 20 "$DIR"/log/*.log >&2 || true
  exit 1
}

status() {
  [ -f "$CONF" ] || { echo "no cluster configured under $DIR"; return 1; }
  local i
  for i in $(seq 1 "$NODES"); do  # a node whose slurmd died still shows idle until SlurmdTimeout
    pid_alive "$DIR/slurmd-$(node_name "$i").pid" || { echo "slurmd of $(node_name "$i") is not running"; return 1; }
  done
  local idle
  idle=$(client sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || { echo "slurmctld does not answer"; return 1; }
  echo "$idle"
  local up; up=$(echo "$idle" | awk '$2 ~ /^(idle|mix|alloc)/' | wc -l)
  [ "$up" -eq "$NODES" ]
}

stop() {
  if [ -f "$CONF" ]; then
    client scancel --full --quiet --user=root 2>/dev/null || true
  fi
  local pids=()
  for f in "$DIR"/slurmd-*.pid "$DIR"/slurmctld.pid; do
    [ -f "$f" ] && pids+=("$(cat "$f")")
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # the steps' daemons and anything they started under this cluster's spool
  pkill -9 -f "slurmstepd: \[" 2>/dev/null || true
  [ -f /run/munge/munged.pid ] && kill "$(cat /run/munge/munged.pid)" 2>/dev/null || pkill -x munged 2>/dev/null || true
  sed -i "\\|$HOSTS_TAG\$|d" /etc/hosts 2>/dev/null || true
  stop_fabric
  rm -f "$DIR"/*.pid
  say "stopped"
}

command=${1:-}; shift || true
if [ "$command" = start ] && [ "${1:-}" = --network ]; then NETWORK=${2:-}; shift 2 || true; fi
case "$NETWORK" in
  ""|loopback|namespaces) ;;
  *) echo "$0: --network is loopback or namespaces, not '$NETWORK'" >&2; exit 2 ;;
esac
# stop, status, running and env act on the cluster as it was started
[ "$command" = start ] || NETWORK=$(cat "$DIR/network" 2>/dev/null || echo "${NETWORK:-loopback}")

case "$command" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  # the mode of the cluster whose controller runs, whether or not it answers (a controller slowed
  # by the suites beside it still runs); exit 1 where none does
  running) pid_alive "$DIR/slurmctld.pid" && echo "$NETWORK" ;;
  env)
    echo "export SLURM_CONF=$CONF"
    if [ "$NETWORK" = namespaces ]; then echo "export PATH=$DIR/bin:\$PATH"; fi
    ;;
  *) echo "usage: $0 start [--network loopback|namespaces]|stop|status|running|env" >&2; exit 2 ;;
esac
