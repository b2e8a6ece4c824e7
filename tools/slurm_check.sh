#!/usr/bin/env bash
# tools/slurm_check.sh — runs a psring bench sweep through Slurm's srun on a throw-away single-host Slurm
# cluster (issue 32). Run once by hand, as root, on a Debian 12 host without systemd (CI does not run it):
#
#   ./bazelw build //bench:scaling && tools/slurm_check.sh
#   SWEEP_CMD='srun --overlap -n1 /bin/echo hello' tools/slurm_check.sh     # set-up and teardown only
#
# Sections (each prints a "# " header and its duration):
#   1. install slurmctld, slurmd, slurm-client and munge with apt-get (idempotent; services are kept from
#      starting by a temporary /usr/sbin/policy-rc.d that exits 101 — left alone when one already exists);
#   2. a private munge key, munged, slurm.conf, slurmctld and slurmd, all under one temp dir (SLURM_CONF is
#      exported for every slurm command; munged listens on a private socket, slurm.conf's AuthInfo names it);
#      waits (bounded) for sinfo to show the node idle, else prints the daemons' log tails and fails;
#   3. inside `salloc -N1 -n<CPUs>`: the sanity check (`srun --overlap -n2 hostname`, SLURM_JOB_NODELIST),
#      the step probes (PSRING_SLURM_PROBES=0 skips them): a step's environment, its start-up time, two
#      concurrent one-task steps, and what happens to a step's task when its srun gets SIGTERM / SIGKILL, and
#      when srun and the child process it forks both get SIGKILL;
#   4. the sweep, SWEEP_CMD (default below), run from the repository root inside the allocation; it fails
#      when the command fails, when no result line ("... s/step (exchange ..., N wrong)") appears, or when a
#      result line has N > 0 wrong.
# Teardown (trap on EXIT, also after INT/TERM): SIGTERM to an unfinished sweep's process group, scancel of
# every job of the private cluster, then SIGTERM (SIGKILL after 10 s) to exactly the salloc, munged, slurmctld
# and slurmd this script started (and slurmstepds left by that slurmd), and removal of the temp dir. The
# packages stay installed. Exit status: 0 only when every section passed.
#
# Environment: SWEEP_CMD; PSRING_SLURM_PORT (slurmctld's port, slurmd uses +1; default 6817);
# PSRING_SLURM_CPUS (the node's CPUs in slurm.conf, default max(nproc, 4)); PSRING_SLURM_NTASKS (salloc -n,
# default the node's CPUs); PSRING_SLURM_PROBES (1); PSRING_SLURM_KILL_WAIT (seconds the SIGKILL-to-the-group
# probe waits for the orphaned task before it scancels the step, default 20); PSRING_SLURM_SWEEP_TIMEOUT
# (seconds, default 540: the allocation's --time is 10 minutes); PSRING_SLURM_REQUIRE_RESULTS (1: at least one
# result line is required; 0: not; default: required when SWEEP_CMD runs bench/scaling).
# shellcheck disable=SC2016,SC2317  # single-quoted $VARs are for the step's shell; teardown runs from the trap
set -uo pipefail

DEFAULT_SWEEP='bazel-bin/bench/scaling --launcher=srun --exchanges=ring,ps-1,ps-colocated --nodes=1,2 --mode=gradient --model_bytes=1M --steps=5'
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
section_name=""
section_start=""
section() {  # section "title": ends the previous section (printing its duration) and starts the next
  [[ -n "$section_name" ]] && echo "# ${section_name}: done in $(elapsed "$section_start") s"
  section_name="$1"
  section_start="$(now)"
  [[ -n "$1" ]] && echo "# $1"
}

# ---------------------------------------------------------------------------------------------------------
# Inside the allocation (salloc runs this script again with --in-allocation).
if [[ "${1:-}" == "--in-allocation" ]]; then
  cd "$root" || exit 1
  T="$PSRING_SLURM_TMP"
  node="${SLURM_JOB_NODELIST:-}"
  section "sanity: allocation ${SLURM_JOB_ID:-?} (salloc -n ${SLURM_NTASKS:-?})"
  env | grep '^SLURM_JOB_NODELIST'
  srun --overlap -n2 hostname || { echo "FAIL: srun --overlap -n2 hostname"; exit 1; }

  if [[ "${PSRING_SLURM_PROBES:-1}" == "1" ]]; then
    section "probe: a one-task step's environment (srun --nodes=1 --ntasks=1 --overlap -w $node)"
    srun --nodes=1 --ntasks=1 --overlap -w "$node" /bin/sh -c 'env | grep ^SLURM_ | sort' |
      grep -E '^SLURM_(PROCID|NTASKS|NPROCS|LOCALID|NODEID|STEP_ID|STEP_NODELIST|STEP_NUM_TASKS|JOB_NODELIST|NODELIST|JOB_ID|LAUNCH_NODE_IPADDR|SRUN_COMM_HOST|CPUS_ON_NODE|STEP_TASKS_PER_NODE)='
    echo "(the salloc shell itself has SLURM_NTASKS=${SLURM_NTASKS:-unset} SLURM_PROCID=${SLURM_PROCID:-unset})"

    section "probe: start-up time of one step (srun ... /bin/true, 5 times)"
    for i in 1 2 3 4 5; do
      t0="$(now)"
      srun --nodes=1 --ntasks=1 --overlap -w "$node" /bin/true
      echo "step $i: rc $? in $(elapsed "$t0") s"
    done

    section "probe: two concurrent one-task steps (A sleeps 5 s; B starts 1 s later)"
    t0="$(now)"
    srun --nodes=1 --ntasks=1 --overlap -w "$node" /bin/sh -c \
      'echo "A: PROCID=$SLURM_PROCID NTASKS=$SLURM_NTASKS STEP=$SLURM_STEP_ID"; sleep 5' &
    a=$!
    sleep 1
    tb="$(now)"
    srun --nodes=1 --ntasks=1 --overlap -w "$node" /bin/sh -c \
      'echo "B: PROCID=$SLURM_PROCID NTASKS=$SLURM_NTASKS STEP=$SLURM_STEP_ID"'
    echo "B: rc $? after $(elapsed "$tb") s (A still running: $(kill -0 "$a" 2>/dev/null && echo yes || echo no))"
    wait "$a"
    echo "A: rc $? after $(elapsed "$t0") s"

    # signal_probe TERM|KILL WAIT [group]: a step whose task writes its pid and sleeps; srun (with "group":
    # srun's whole process group, i.e. srun and the child srun forks) gets the signal once the task runs;
    # reports whether (and how fast) the task goes away, and cancels the step if it does not.
    signal_probe() {
      local sig="$1" wait_s="$2" group="${3:-}" pidfile="$T/probe_$1${3:-}.pid" stepfile="$T/probe_$1${3:-}.step"
      local s t0 pid step target who
      rm -f "$pidfile" "$stepfile"
      # setsid: srun leads a process group of its own (a background job of this shell is no group leader,
      # so setsid execs srun in place and $! is srun's pid).
      setsid srun --nodes=1 --ntasks=1 --overlap -w "$node" /bin/sh -c \
        "echo \$SLURM_STEP_ID > $stepfile; echo \$\$ > $pidfile.tmp; mv $pidfile.tmp $pidfile; exec sleep 300" &
      s=$!
      target="$s" who="srun"
      [[ -n "$group" ]] && target="-$s" who="srun's process group"
      for _ in $(seq 100); do [[ -s "$pidfile" ]] && break; sleep 0.1; done
      pid="$(cat "$pidfile" 2>/dev/null)"; step="$(cat "$stepfile" 2>/dev/null)"
      [[ -n "$pid" ]] || { echo "SIG$sig: the task did not start"; kill -KILL "$s"; return; }
      sleep 1
      [[ -n "$group" ]] && echo "srun's process group: $(pgrep -g "$s" | tr '\n' ' ')"
      t0="$(now)"
      kill "-$sig" -- "$target"
      for _ in $(seq $((wait_s * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "SIG$sig to $who: task pid $pid (step ${SLURM_JOB_ID}.$step) STILL RUNNING after $(elapsed "$t0") s"
        squeue -s -j "$SLURM_JOB_ID" -h -o '  squeue: step %i %j %M'
        scancel "${SLURM_JOB_ID}.$step"
        t0="$(now)"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        echo "  scancel ${SLURM_JOB_ID}.$step: task gone after $(elapsed "$t0") s: $(kill -0 "$pid" 2>/dev/null && echo no || echo yes)"
      else
        echo "SIG$sig to $who: task pid $pid (step ${SLURM_JOB_ID}.$step) gone after $(elapsed "$t0") s"
      fi
      wait "$s" 2>/dev/null
      echo "  srun's exit status: $?"
    }
    section "probe: SIGTERM to a step's srun"
    signal_probe TERM 30
    section "probe: SIGKILL to a step's srun (its pid only)"
    signal_probe KILL 30
    section "probe: SIGKILL to a step's srun and its child (srun's process group)"
    signal_probe KILL "${PSRING_SLURM_KILL_WAIT:-20}" group
  fi

  section "sweep: $SWEEP_CMD"
  # timeout runs the sweep in a process group of its own (pgid = its pid, recorded for teardown) and ends it
  # (SIGTERM, SIGKILL 10 s later) when it runs past PSRING_SLURM_SWEEP_TIMEOUT.
  {
    timeout -k 10 "${PSRING_SLURM_SWEEP_TIMEOUT:-540}" bash -c "$SWEEP_CMD" 2>&1 &
    echo "$!" > "$T/sweep.pgid"
    wait "$!"
    echo "$?" > "$T/sweep.rc.tmp"
  } | tee "$T/sweep.log"
  rc="$(cat "$T/sweep.rc.tmp")"
  ((rc == 124)) && echo "FAIL: the sweep ran past ${PSRING_SLURM_SWEEP_TIMEOUT:-540} s"
  mv "$T/sweep.rc.tmp" "$T/sweep.rc"
  section ""
  exit "$rc"
fi

# ---------------------------------------------------------------------------------------------------------
# Outside: install, start, allocate, check, tear down.
[[ "$(id -u)" == 0 ]] || { echo "run as root (it installs packages and starts munged/slurmctld/slurmd)"; exit 2; }
SWEEP_CMD="${SWEEP_CMD:-$DEFAULT_SWEEP}"
export SWEEP_CMD
ctld_port="${PSRING_SLURM_PORT:-6817}"
# The node's CPUs: the harness takes SLURM_JOB_CPUS_PER_NODE as the node's slots and the default sweep runs up
# to 3 processes at once, so a host with fewer than 4 cores declares 4 (SlurmdParameters=config_overrides keeps
# slurmd from draining a node that has fewer than its configured CPUs). Steps use --overlap anyway.
cpus="${PSRING_SLURM_CPUS:-$(( $(nproc) < 4 ? 4 : $(nproc) ))}"
ntasks="${PSRING_SLURM_NTASKS:-$cpus}"
node="$(hostname -s)"
T=""
started_pids=()  # munged, slurmctld, slurmd: the only daemons teardown kills
salloc_pid=""
policy_created=0
POLICY=/usr/sbin/policy-rc.d
POLICY_MARK="# tools/slurm_check.sh: temporary"
overall_start="$(now)"

stop_pids() {  # stop_pids WHAT PID: SIGTERM to PID (a process, or -PGID for a group), SIGKILL after 10 s
  local what="$1" pid="$2" t0
  kill -0 -- "$pid" 2>/dev/null || return 0
  kill -TERM -- "$pid" 2>/dev/null
  t0="$(now)"
  for _ in $(seq 100); do kill -0 -- "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 -- "$pid" 2>/dev/null; then kill -KILL -- "$pid" 2>/dev/null; echo "$what ($pid): SIGKILL after 10 s"; fi
  wait "${pid#-}" 2>/dev/null
  echo "stopped $what ($pid) in $(elapsed "$t0") s"
}

teardown() {
  local rc=$? p stepds
  trap - EXIT INT TERM
  section "teardown"
  if [[ "$policy_created" == 1 ]] && grep -qF "$POLICY_MARK" "$POLICY" 2>/dev/null; then rm -f "$POLICY"; fi
  if [[ -n "$T" && -s "$T/sweep.pgid" && ! -f "$T/sweep.rc" ]]; then  # an interrupted sweep
    stop_pids "sweep" "-$(cat "$T/sweep.pgid")"
  fi
  if [[ -n "$T" && -f "$T/slurm.conf" ]]; then
    if [[ -n "$(squeue -h -o %i 2>/dev/null)" ]]; then
      echo "scancel: $(squeue -h -o %i | tr '\n' ' ')"
      # shellcheck disable=SC2046  # job ids: one word each
      scancel --quiet $(squeue -h -o %i) 2>/dev/null
      for _ in $(seq 50); do [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break; sleep 0.2; done
    fi
    # slurmstepd processes of this cluster (they carry this SLURM_CONF in their environment); wait for them
    # to finish after the scancel, then they are killed with the daemons.
    stepds=()
    for p in $(pgrep -x slurmstepd 2>/dev/null); do
      tr '\0' '\n' 2>/dev/null < "/proc/$p/environ" | grep -qxF "SLURM_CONF=$T/slurm.conf" && stepds+=("$p")
    done
    started_pids+=("${stepds[@]}")
  fi
  [[ -n "$salloc_pid" ]] && stop_pids salloc "$salloc_pid"
  # Reverse order: slurmstepds, slurmd, slurmctld, munged.
  for ((i = ${#started_pids[@]} - 1; i >= 0; i--)); do stop_pids "$(ps -o comm= -p "${started_pids[i]}")" "${started_pids[i]}"; done
  [[ -n "$T" ]] && rm -rf "$T" && echo "removed $T"
  section ""
  echo "# total: $(elapsed "$overall_start") s; exit status $rc"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

die() { echo "FAIL: $*"; exit 1; }
logs() {  # the daemons' log tails
  local f
  for f in "$T"/log/*; do echo "--- tail of $f"; tail -n 25 "$f"; done
}

section "install: slurmctld slurmd slurm-client munge"
pkgs=(slurmctld slurmd slurm-client munge)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ ! -e "$POLICY" ]]; then
    printf '#!/bin/sh\n%s\nexit 101\n' "$POLICY_MARK" > "$POLICY" && chmod 755 "$POLICY" && policy_created=1
  else
    echo "$POLICY already exists (not ours): left as it is: $(grep -v '^#' "$POLICY" | tr '\n' ' ')"
  fi
  echo "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
    "${pkgs[@]}" > /tmp/slurm_check_apt.log 2>&1 || { tail -n 30 /tmp/slurm_check_apt.log; die "apt-get install"; }
  if [[ "$policy_created" == 1 ]] && grep -qF "$POLICY_MARK" "$POLICY"; then rm -f "$POLICY"; policy_created=0; fi
  rm -f /tmp/slurm_check_apt.log
else
  echo "already installed: ${pkgs[*]}"
fi
echo "$(slurmctld -V), $(munged -V 2>&1 | head -n 1); PID 1: $(ps -o comm= -p 1)"
for p in "$ctld_port" "$((ctld_port + 1))"; do
  ss -ltn 2>/dev/null | awk '{print $4}' | grep -q ":$p\$" && die "port $p is in use (set PSRING_SLURM_PORT)"
done

section "start: munged, slurmctld, slurmd (node $node, CPUs=$cpus on $(nproc) cores, ports $ctld_port/$((ctld_port + 1)))"
T="$(mktemp -d /tmp/psring-slurm.XXXXXX)" || die "mktemp"
chmod 700 "$T"
mkdir -p "$T/munge" "$T/log" "$T/state" "$T/spool"
export SLURM_CONF="$T/slurm.conf"
export PSRING_SLURM_TMP="$T"
# The munge key: mungekey when there is one (munge >= 0.5.14), else 1024 bytes from /dev/urandom.
if command -v mungekey > /dev/null; then
  mungekey --create --keyfile="$T/munge/munge.key" > /dev/null || die "mungekey"
else
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none || die "dd munge key"
fi
chmod 600 "$T/munge/munge.key"
# munged as root needs --force; -F keeps it in the foreground so that $! is its pid.
munged -F --force --socket="$T/munge/munge.socket.2" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/log/munged.log" --seed-file="$T/munge/munged.seed" \
  > "$T/log/munged.out" 2>&1 &
started_pids+=($!)
for _ in $(seq 50); do [[ -S "$T/munge/munge.socket.2" ]] && break; sleep 0.1; done
munge --socket="$T/munge/munge.socket.2" -n | unmunge --socket="$T/munge/munge.socket.2" > /dev/null ||
  { logs; cat "$T/log/munged.out"; die "munge credential round trip"; }
echo "munged pid ${started_pids[0]}: a credential round trip works"

cat > "$SLURM_CONF" << EOF
ClusterName=psring
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket.2
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
echo "slurm.conf ($SLURM_CONF):"
sed "s|$T|\$T|g; s/^/  /" "$SLURM_CONF"
# -D: foreground, so that $! is the daemon's pid.
slurmctld -D > "$T/log/slurmctld.out" 2>&1 &
started_pids+=($!)
slurmd -D -N "$node" > "$T/log/slurmd.out" 2>&1 &
started_pids+=($!)
echo "slurmctld pid ${started_pids[1]}, slurmd pid ${started_pids[2]}"
state=""
for _ in $(seq 60); do
  state="$(sinfo -h -N -n "$node" -o %t 2>/dev/null)"
  [[ "$state" == idle ]] && break
  for p in "${started_pids[@]}"; do kill -0 "$p" 2>/dev/null || { logs; die "daemon pid $p exited"; }; done
  sleep 0.5
done
[[ "$state" == idle ]] || { logs; die "node $node is not idle after 30 s (state '${state:-none}')"; }
sinfo

section "allocation: salloc -N1 -n$ntasks --time=10 (sanity check, probes, sweep)"
echo "sweep: $SWEEP_CMD"
# In the background, so that INT/TERM reach the trap at once (bash runs a trap only after a foreground child).
salloc -N1 -n"$ntasks" --time=10 -J psring-slurm-check "$self" --in-allocation &
salloc_pid=$!
wait "$salloc_pid"
salloc_rc=$?
echo "# salloc exited with status $salloc_rc"

section "check: the sweep's result lines"
[[ -f "$T/sweep.rc" ]] || die "the allocation ended before the sweep ran (salloc exit status $salloc_rc)"
sweep_rc="$(cat "$T/sweep.rc")"
results="$(grep -E 's/step \(exchange .*, -?[0-9]+ wrong\)' "$T/sweep.log")"
n_results="$(grep -c . <<< "$results")"
[[ -n "$results" ]] || n_results=0
bad="$(grep -vE ', 0 wrong\)' <<< "$results" | grep .)"
echo "sweep exit status $sweep_rc; $n_results result line(s); $(grep -c . <<< "$bad") with wrong > 0"
[[ -z "$bad" ]] || echo "$bad"
fail=0
[[ "$sweep_rc" == 0 ]] || { echo "FAIL: the sweep exited with status $sweep_rc"; fail=1; }
require="${PSRING_SLURM_REQUIRE_RESULTS:-auto}"
[[ "$require" == auto ]] && { [[ "$SWEEP_CMD" == *bench/scaling* ]] && require=1 || require=0; }
if ((n_results == 0)); then
  if [[ "$require" == 1 ]]; then echo "FAIL: no result line"; fail=1; else echo "(no result line: not required for this SWEEP_CMD)"; fi
fi
[[ -z "$bad" ]] || { echo "FAIL: result lines with wrong > 0"; fail=1; }
((fail == 0)) && echo "PASS"
exit "$fail"
