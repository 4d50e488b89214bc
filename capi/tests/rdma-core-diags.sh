#!/usr/bin/env bash
# Current rdma-core (56.1, built from Debian trixie's source by scripts/rdma-core) on vmad's
# libibumad, beside Debian bookworm's 44.0. Since 56, libibmad opens an SMI *and* a GSI port
# of each CA (mad_rpc_open_port2), so every diag needs two opens of one port.
#
#   capi/tests/rdma-core-diags.sh [sim|ibsim|all]     (default: all)
#
# sim:   the embedded fabric (VMAD_TRANSPORT unset; its built-in SM, SA and PMAs): each 56
#        diag gives what the 44 one gives on vmad, and what the fabric is (GUIDs, LIDs).
# ibsim: ibsim with OpenSM on vmad (nothing but the library path): each diag, 56 and 44, on
#        vmad gives what the 44 one gives under umad2sim (the reference), and rdma-core's own
#        libibumad test programs run unmodified.
# Prints "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mode=${1:-all}
passed=0
failed=0
check() { # description, then a command that succeeds iff the check passes
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); echo "ok: $what"; else failed=$((failed + 1)); echo "FAIL: $what"; fi
}

rc_build=$(scripts/rdma-core build) || { echo "FAIL: building rdma-core 56.1"; exit 1; }
B=$rc_build
cargo build -q -p vmad-capi || exit 1
libdir=$root/target/debug/vmad-lib
mkdir -p "$libdir"
ln -sf ../libibumad.so "$libdir/libibumad.so.3"
ln -sf ../libibumad.so "$libdir/libibumad.so"

# The terminal, for what must reach the log from inside a $(...) capture.
exec 9>&2
limit=120
# bounded CMD...: CMD, killed after $limit s (exit 124). A diag that hangs once in thousands
# of runs leaves only its silence: before the kill, the stacks of all its threads (gdb,
# where installed) go to the log, so the next one says where it waited.
bounded() {
  "$@" &
  local pid=$! rc
  # Off the capture's pipe, so that nothing of the watcher keeps $(...) waiting.
  (
    trap 'kill $s 2>/dev/null; exit 0' TERM
    sleep $limit &
    s=$!
    wait $s
    echo "== $* (pid $pid) still running after $limit s: its threads' stacks, then kill" >&9
    command -v gdb >/dev/null && gdb -p "$pid" -batch -ex 'thread apply all bt' </dev/null 2>&1 |
      grep -v '^\[New LWP' >&9
    kill -KILL "$pid" 2>/dev/null
  ) >/dev/null 2>&1 &
  local watcher=$!
  wait "$pid"
  rc=$?
  kill "$watcher" 2>/dev/null
  wait "$watcher" 2>/dev/null
  # Killed by the watcher: report it as timeout(1) would.
  [ $rc = 137 ] && rc=124
  return $rc
}
# 56 on vmad: vmad's libibumad first, then rdma-core 56's libibmad/libibnetdisc.
new() { LD_LIBRARY_PATH=$libdir:$B/lib bounded "$B/bin/$1" "${@:2}" 2>&1; }
# Debian's 44 on vmad.
old() { LD_LIBRARY_PATH=$libdir bounded "$@" 2>&1; }
# Comments (timestamps) and blank lines differ run to run; the PortInfo fields rdma-core
# added after 44 (XDR's LinkSpeedExt*2) exist only in 56's output.
strip() { grep -v -e '^#' -e '^$' -e '^LinkSpeedExt[A-Za-z]*2:'; }
same() { # description, command words: 56 on vmad = 44 on vmad (both succeed)
  local what=$1 a b
  shift
  a=$(new "$@") || { echo "   56 (exit $?): $a" | head -5; check "$what: rdma-core 56 $* succeeds" false; return; }
  b=$(old "$@") || { echo "   44 (exit $?): $b" | head -5; check "$what: Debian 44 $* succeeds" false; return; }
  check "$what: 56 = 44 ($*)" diff <(strip <<<"$a") <(strip <<<"$b")
}

check "rdma-core 56's smpquery resolves libibumad.so.3 to vmad and libibmad.so.5 to 56" bash -c \
  "LD_LIBRARY_PATH='$libdir:$B/lib' ldd '$B/bin/smpquery' | grep -q 'libibumad.so.3 => $libdir' &&
   LD_LIBRARY_PATH='$libdir:$B/lib' ldd '$B/bin/smpquery' | grep -q 'libibmad.so.5 => $B/lib'"

sim_tests() {
  echo "== rdma-core 56 on the embedded fabric"
  (
    unset VMAD_TRANSPORT VMAD_SIM_FAULTS
    out=$(new smpquery nodeinfo 2)
    check "smpquery nodeinfo 2 (56, two opens of vmadsim0 port 1): vmadsim1's GUID" \
      grep -q 'Guid:\.*0x766d616400000200' <<<"$out"
    same "LID-routed NodeInfo" smpquery nodeinfo 2
    same "directed-route NodeInfo" smpquery -D nodeinfo 0,1
    same "PortInfo" smpquery portinfo 1
    same "NodeDescription" smpquery nodedesc 2
    same "ibnetdiscover" ibnetdiscover
    same "iblinkinfo" iblinkinfo
    same "ibtracert" ibtracert 1 2
    # The fabric's services: its SM (sminfo), SA (saquery), PMAs (perfquery,
    # ibqueryerrors) and its switch vmadsw0, LID 3 (ibroute).
    same "SMInfo" sminfo
    same "SA NodeRecords" saquery -N
    same "SA PathRecords" saquery -p
    same "PMA PortCounters" perfquery
    same "PMA, all ports" ibqueryerrors
    same "the switch's LFT" ibroute 3
    out=$(new saquery -N | grep -c 'NodeRecord dump')
    check "saquery -N (56) on the embedded fabric: its 3 nodes (got $out)" [ "$out" = 3 ]
    echo "sim: $passed passed, $failed failed" >"$root/target/debug/.rdma-core-sim"
  )
  local r
  r=$(cat "$root/target/debug/.rdma-core-sim")
  passed=$(sed 's/.*: \([0-9]*\) passed.*/\1/' <<<"$r")
  failed=$(sed 's/.*, \([0-9]*\) failed.*/\1/' <<<"$r")
}

ibsim_tests() {
  echo "== rdma-core 56 on ibsim, OpenSM on vmad"
  local topo=$root/tests/topo/small.net env_file run work nodes
  nodes=$(grep -cE '^(Hca|Switch|Rt)' "$topo")
  env_file=$(mktemp)
  scripts/ibsim-start "$topo" >"$env_file" </dev/null || { check "ibsim-start" false; return; }
  # shellcheck disable=SC1090
  . "$env_file"
  rm -f "$env_file"
  run=$VMAD_IBSIM_RUN
  # shellcheck disable=SC2064
  trap "scripts/ibsim-stop '$run' >/dev/null 2>&1" EXIT
  work=$run/vmad
  mkdir -p "$work"
  printf 'force_log_flush TRUE\n' >"$work/opensm.conf"
  (
    cd "$work" && unset SIM_HOST SIM_SET_ISSM && OSM_CACHE_DIR=$work OSM_TMP_DIR=$work \
      VMAD_TRANSPORT=ibsim LD_LIBRARY_PATH=$libdir exec opensm -F "$work/opensm.conf" -s 0 -f "$work/opensm.log"
  ) >"$work/opensm.out" 2>&1 </dev/null &
  echo $! >"$run/opensm.pid"
  disown
  local i up=1
  for i in $(seq 600); do
    grep -q 'SUBNET UP' "$work/opensm.log" 2>/dev/null && { up=0; break; }
    sleep 0.2
  done
  check "OpenSM on vmad (no SM-role variable) reaches SUBNET UP" [ $up = 0 ] || return

  export VMAD_TRANSPORT=ibsim
  export SIM_HOST
  SIM_HOST=$(awk -F'"' '/^Hca/ { n++; if (n == 2) { print $2; exit } }' "$topo")
  ref() { # Debian 44 under umad2sim, retried (a umad2sim client sometimes loses its first MADs)
    local i out
    for i in 1 2 3; do
      out=$(timeout "$limit" scripts/ibsim-exec "$run" "$@" 2>&1) && { printf '%s\n' "$out"; return 0; }
    done
    printf '%s\n' "$out"
    return 1
  }
  vs_ref() { # description, filter, command words: 56 and 44 on vmad = 44 under umad2sim
    local what=$1 filter=$2 a b c
    shift 2
    b=$(ref "$@") || { echo "   ref: $b" | head -5; check "$what: reference $*" false; return; }
    a=$(new "$@") || { echo "   56: $a" | head -5; check "$what: 56 on vmad: $*" false; return; }
    c=$(old "$@") || { echo "   44: $c" | head -5; check "$what: 44 on vmad: $*" false; return; }
    check "$what: 56 on vmad = 44 under umad2sim ($*)" \
      diff <(strip <<<"$a" | grep -Ev "$filter") <(strip <<<"$b" | grep -Ev "$filter")
    check "$what: 44 on vmad = 44 under umad2sim ($*)" \
      diff <(strip <<<"$c" | grep -Ev "$filter") <(strip <<<"$b" | grep -Ev "$filter")
  }
  local sm_lid sw_lid
  sm_lid=$(new sminfo | sed -n 's/^sminfo: sm lid \([0-9]*\) .*/\1/p')
  check "sminfo (56) on vmad finds the master SM (lid ${sm_lid:-none})" [ -n "$sm_lid" ]
  vs_ref "sminfo" 'activity count' sminfo
  vs_ref "NodeInfo" '^$x' smpquery nodeinfo "$sm_lid"
  vs_ref "PortInfo" '^$x' smpquery portinfo "$sm_lid"
  vs_ref "ibnetdiscover" '^$x' ibnetdiscover
  vs_ref "iblinkinfo" '^$x' iblinkinfo
  sw_lid=$(new ibnetdiscover | sed -n 's/^Switch.* lid \([0-9]*\) .*/\1/p' | head -1)
  vs_ref "ibroute" '^$x' ibroute "$sw_lid"
  vs_ref "ibtracert" '^$x' ibtracert "$sm_lid" 2
  vs_ref "perfquery (counters other than traffic)" 'Data|Pkts|Wait' perfquery
  vs_ref "ibqueryerrors" 'Data|Pkts|Wait' ibqueryerrors
  local n
  n=$(new saquery -N | grep -c 'NodeRecord dump')
  check "saquery -N (56) on vmad: all $nodes NodeRecords (got $n; umad2sim has no RMPP)" [ "$n" = "$nodes" ]
  n=$(new saquery -p | grep -c 'PathRecord dump')
  check "saquery -p (56) on vmad: a PathRecord for every pair of $nodes end ports (got $n)" [ "$n" = $((nodes * nodes)) ]

  # rdma-core's own libibumad test programs, unmodified. Not umad_register2 here: it first
  # asks the kernel for IB_USER_MAD_REGISTER_AGENT2 with ioctl() on the port id, libibumad's
  # umad device descriptor, which vmad's port id is not, and there is no umad device on
  # ibsim. It runs and is counted in the rxe VM instead, on the drop-in's kernel transport,
  # its probe aimed at the kernel's umad device (scripts/rxe-test, tests/it/kernel.rs).
  echo "elsewhere: umad_register2 (56): in the rxe VM on the kernel transport (scripts/rxe-test," \
    "kernel::kernel_rdma_core_umad_register2_test_passes_on_the_dropin)"
  local out
  # Create, join and leave the IPoIB broadcast group for this port, through OpenSM's SA.
  LD_LIBRARY_PATH=$libdir:$B/lib "$B/bin/ibstat" -p >"$work/port_guids.list" 2>/dev/null
  check "ibstat -p (56) on vmad: the port GUID ($(cat "$work/port_guids.list"))" \
    grep -qE '^0x[0-9a-f]{16}$' "$work/port_guids.list"
  for op in -c -j -l; do
    out=$(cd "$work" && new umad_sa_mcm_rereg_test -F "$work/port_guids.list" "$op")
    check "umad_sa_mcm_rereg_test $op (56) on vmad: answered, status 0 ($(tail -1 <<<"$out"))" \
      bash -c "grep -q 'query_all: 1 of 1 queried' <<<\"\$1\" && ! grep -qE '^ERR|status 0x' <<<\"\$1\"" _ "$out"
  done
  echo "ibsim: $passed passed, $failed failed" >"$root/target/debug/.rdma-core-ibsim"
}

case $mode in
  sim) sim_tests ;;
  ibsim) ibsim_tests ;;
  all) sim_tests; ibsim_tests ;;
  *) echo "usage: $0 [sim|ibsim|all]" >&2; exit 2 ;;
esac
echo "rdma-core-diags: $passed passed, $failed failed"
[ "$failed" = 0 ]
