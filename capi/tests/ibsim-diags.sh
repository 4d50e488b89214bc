#!/usr/bin/env bash
# Unmodified Debian binaries on vmad's libibumad over ibsim: OpenSM (SM + SA, with vmad's
# RMPP) brings the fabric up, then saquery, ibnetdiscover, smpquery and perfquery run on
# vmad and are checked against the topology and against the same tools on umad2sim.
#
#   capi/tests/ibsim-diags.sh [topology.net] [client node]
#
# Defaults: tests/topo/small.net, the topology's second CA. Prints "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
topo=${1:-$root/tests/topo/small.net}
nodes=$(grep -cE '^(Hca|Switch|Rt)' "$topo")
client=${2:-$(awk -F'"' '/^Hca/ { n++; if (n == 2) { print $2; exit } }' "$topo")}
passed=0
failed=0
check() { # description, then a command that succeeds iff the check passes
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); echo "ok: $what"; else failed=$((failed + 1)); echo "FAIL: $what"; fi
}

cd "$root"
cargo build -q -p vmad-capi || exit 1
env_file=$(mktemp)
scripts/ibsim-start "$topo" >"$env_file" </dev/null || { echo "FAIL: ibsim-start"; exit 1; }
# shellcheck disable=SC1090
. "$env_file"
rm -f "$env_file"
run=$VMAD_IBSIM_RUN
trap 'scripts/ibsim-stop "$run" >/dev/null 2>&1' EXIT
work=$run/vmad
mkdir -p "$work"

# OpenSM on vmad at ibsim's default node. Nothing but the library path: OpenSM takes the SM
# role by opening the path umad_get_issm_path gives, as it does on a kernel.
printf 'force_log_flush TRUE\n' >"$work/opensm.conf"
(
  cd "$work" && unset SIM_HOST && OSM_CACHE_DIR=$work OSM_TMP_DIR=$work \
    exec env -u SIM_SET_ISSM "$root/scripts/with-vmad" --ibsim opensm -F "$work/opensm.conf" -s 0 -f "$work/opensm.log"
) >"$work/opensm.out" 2>&1 </dev/null &
echo $! >"$run/opensm.pid"
disown
up() {
  local i
  for i in $(seq 600); do
    grep -q 'SUBNET UP' "$work/opensm.log" 2>/dev/null && return 0
    kill -0 "$(cat "$run/opensm.pid")" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
check "OpenSM on vmad reaches SUBNET UP ($nodes nodes)" up || { tail -20 "$work/opensm.log"; exit 1; }

export SIM_HOST=$client
vmad() { timeout 120 "$root/scripts/with-vmad" --ibsim "$@" 2>&1; }
umad2sim() { # the reference; retried, as a umad2sim client sometimes loses its first MADs
  local i out
  for i in 1 2 3; do
    out=$(timeout 120 "$root/scripts/ibsim-exec" "$run" "$@" 2>&1) && { printf '%s\n' "$out"; return 0; }
  done
  printf '%s\n' "$out"
  return 1
}
count() { grep -c "$1" || true; }

n=$(vmad saquery -N | count 'NodeRecord dump')
check "saquery -N on vmad prints all $nodes NodeRecords (got $n)" [ "$n" = "$nodes" ]
n_sim=$(umad2sim saquery -N | count 'NodeRecord dump')
echo "   (umad2sim, without RMPP: $n_sim NodeRecords)"

n=$(vmad saquery -s | count 'PortInfoRecord dump')
check "saquery -s on vmad: the SM's PortInfoRecord (got $n)" [ "$n" = 1 ]

sminfo=$(vmad sminfo)
check "sminfo on vmad: a master SM ($sminfo)" grep -q 'SMINFO_MASTER' <<<"$sminfo"
sm_lid=$(sed -n 's/^sminfo: sm lid \([0-9]*\) .*/\1/p' <<<"$sminfo")

n=$(vmad saquery PortInfoRecord | count 'PortInfoRecord dump')
check "saquery PortInfoRecord on vmad: one record per port with a LID or more ($n >= $nodes)" [ "$n" -ge "$nodes" ]

if [ "$nodes" -le 64 ]; then
  n=$(vmad saquery -p | count 'PathRecord dump')
  check "saquery -p on vmad: a PathRecord for every pair of $nodes end ports (got $n)" [ "$n" = $((nodes * nodes)) ]
fi

strip() { grep -v -e '^#' -e '^$'; }
vmad ibnetdiscover | strip >"$work/ibnetdiscover.vmad"
umad2sim ibnetdiscover | strip >"$work/ibnetdiscover.umad2sim"
found=$(grep -cE '^(Ca|Switch|Rt)' "$work/ibnetdiscover.vmad")
check "ibnetdiscover on vmad finds all $nodes nodes (got $found)" [ "$found" = "$nodes" ]
check "ibnetdiscover on vmad = on umad2sim" diff -q "$work/ibnetdiscover.vmad" "$work/ibnetdiscover.umad2sim"

for lid in "$sm_lid" $((nodes / 2 + 1)); do
  check "smpquery nodeinfo $lid: vmad = umad2sim" diff <(vmad smpquery nodeinfo "$lid") <(umad2sim smpquery nodeinfo "$lid")
done
traffic='Data|Pkts|Wait'
check "perfquery (counters other than traffic): vmad = umad2sim" \
  diff <(vmad perfquery | grep -Ev "$traffic") <(umad2sim perfquery | grep -Ev "$traffic")
check "perfquery on vmad reads PortXmitData" bash -c "'$root/scripts/with-vmad' --ibsim perfquery | grep -q PortXmitData"

capmask=$(vmad smpquery portinfo "$sm_lid" | sed -n 's/^CapMask:\.*\(0x[0-9a-f]*\).*/\1/p')
check "the SM's port has PortInfo:CapMask.IsSM, set by OpenSM's issm open ($capmask)" \
  [ $((${capmask:-0} & 2)) = 2 ]

# Last, as it ends the fabric: ibsim killed under a C program blocked in umad_recv(-1) and
# umad_poll(-1) on vmad: both must return -EIO, within seconds.
libdir=$root/target/debug/vmad-lib
mkdir -p "$libdir" && ln -sf ../libibumad.so "$libdir/libibumad.so.3"
cc -std=gnu11 -Wall -g -o "$work/opens" "$root/capi/tests/c/opens.c" -L"$libdir" -l:libibumad.so.3 \
  -lpthread -Wl,-rpath,"$libdir"
(VMAD_TRANSPORT=ibsim timeout 60 "$work/opens" ibsim-eio >"$work/opens.out" 2>&1; echo "rc=$?" >>"$work/opens.out") &
waiter=$!
# Until both of its own threads (vmad's have names of their own) sleep in poll(2): the
# umad_recv and the umad_poll are blocked on vmad's descriptors. A minute only guards
# against a hang; without the wait ibsim could go before the calls block, and they
# would fail at once, which tests less.
blocked_in_poll() {
  local t n=0
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = opens ] || continue
    case $(cat "$t/wchan" 2>/dev/null) in *poll*) n=$((n + 1)) ;; esac
  done
  [ "$n" -ge 2 ]
}
opens_pid=
for _ in $(seq 600); do
  opens_pid=$(pgrep -f -n "^$work/opens ibsim-eio" || true)
  [ -n "$opens_pid" ] && blocked_in_poll "$opens_pid" && break
  opens_pid=
  sleep 0.1
done
check "the C program blocked in umad_recv(-1) and umad_poll(-1) before ibsim goes" [ -n "$opens_pid" ]
kill "$(cat "$run/ibsim.pid")"
wait "$waiter"
cat "$work/opens.out"
check "ibsim killed under blocked umad_recv(-1)/umad_poll(-1): both -EIO" grep -q '^rc=0' "$work/opens.out"

echo "ibsim-diags $(basename "$topo"): $passed passed, $failed failed"
[ "$failed" = 0 ]
