#!/usr/bin/env bash
# Unmodified Debian diagnostics on vmad's libibumad and its embedded fabric, with no ibsim
# and no OpenSM: the fabric's built-in SM has brought the subnet up inside each process.
#
#   capi/tests/sim-diags.sh [topology.net ...]
#
# Always checks the default fabric (vmadsim0 LID 1 = the SM, vmadsim1 LID 2, switch
# vmadsw0 LID 3); then each topology given, through VMAD_SIM_TOPO: ibnetdiscover finds the
# GUIDs ibnetdiscover finds on ibsim for the same file (skipped without ibsim), ibroute's
# LFTs take every switch to every LID, ibqueryerrors checks every node.
# saquery asks the fabric's SA. Prints "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
passed=0
failed=0
check() { # description, then a command that succeeds iff the check passes
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); echo "ok: $what"; else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
cd "$root"
cargo build -q -p vmad-capi || exit 1
vmad() { timeout 120 "$root/scripts/with-vmad" "$@" 2>&1; }
has() { grep -qE -- "$2" <<<"$1"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/vmad-sim-diags.XXXXXXXX")
trap 'rm -rf "$work"' EXIT

# Every switch's LFT (ibroute) leads to every LID, following the links ibnetdiscover -p saw.
lft_walk() { # file with `ibnetdiscover -p` output; prints the problems, succeeds if none
  local ports=$1 sw
  : >"$work/lft"
  for sw in $(awk '$1 == "SW" { print $2 }' "$ports" | sort -un); do
    vmad ibroute "$sw" | while read -r lid out rest; do
      [[ $lid =~ ^0x[0-9a-f]+$ && $rest == :* ]] && echo "$sw $((lid)) $((10#$out))"
    done >>"$work/lft"
  done
  [ -s "$work/lft" ] || { echo "no LFT entries read"; return 1; }
  awk '
    FILENAME == ARGV[1] { lft[$1 " " $2] = $3; next }  # switch lid, dest lid -> out port
    $1 == "SW" || $1 == "CA" {
      lids[$2] = 1; if ($1 == "SW") sw[$2] = 1
      if ($7 == "-") peer[$2 " " $3] = $9               # lid port -> peer lid
    }
    END {
      bad = 0
      for (s in sw) for (d in lids) {
        at = s; ok = 0
        for (hop = 0; hop < 64; hop++) {
          if (at == d) { ok = 1; break }
          if (!((at " " d) in lft)) break
          out = lft[at " " d]
          if (out == 0) break
          if (!((at " " out) in peer)) break
          at = peer[at " " out]
          if (at != d && !(at in sw)) break
        }
        if (!ok && bad++ < 5) print "switch " s " does not reach lid " d
        walks++
      }
      if (walks == 0) { print "no switch to walk from"; bad = 1 }
      exit bad > 0
    }' "$work/lft" "$ports"
}

# reset_read_back STATUS OUTPUT: perfquery -R exited 0, and pma-readback's lines say the data
# counters were cleared. After the reset, a counter holds only the MADs since (the Set's
# response out of the port, the read-back's Get into it): at most 4 frames, 4 x 73 words
# (a 256-byte MAD's frame); before it, the SM's bring-up left more than that, or the
# check could not tell a reset from none.
reset_read_back() {
  local before after
  before=$(sed -n 's/^pma-readback before: //p' <<<"$2")
  after=$(sed -n 's/^pma-readback after: //p' <<<"$2")
  echo "   perfquery -R: exit $1; before: ${before:-none}; read back after: ${after:-none}"
  [ "$1" = 0 ] && [ -n "$before" ] && [ -n "$after" ] || { printf '%s\n' "$2" | head -5; return 1; }
  awk -v b="$before" -v a="$after" 'BEGIN {
    split(b, bv, /[ =]/); split(a, av, /[ =]/)
    for (i = 1; i <= 7; i += 2) {
      bound = bv[i] ~ /data/ ? 4 * 73 : 4
      if (!(bv[i + 1] + 0 > bound)) { print "   " bv[i] " was " bv[i + 1] " before the reset: too little to tell"; bad = 1 }
      if (!(av[i + 1] + 0 <= bound)) { print "   " av[i] " is " av[i + 1] " after the reset (at most " bound ")"; bad = 1 }
    }
    exit bad
  }'
}

echo "== the default fabric"
out=$(vmad sminfo)
check "sminfo: the built-in SM is MASTER at LID 1" has "$out" '^sminfo: sm lid 1 .*SMINFO_MASTER'
out=$(vmad smpquery nodeinfo 2)
check "smpquery nodeinfo 2: vmadsim1's GUID" has "$out" '^Guid:\.+0x766d616400000200$'
out=$(vmad smpquery portinfo 2 1)
check "smpquery portinfo 2 1: LID 2, SM LID 1, Active" \
  bash -c 'grep -q "^Lid:\.*2$" <<<"$1" && grep -q "^SMLid:\.*1$" <<<"$1" && grep -q "^LinkState:\.*Active$" <<<"$1"' _ "$out"
out=$(vmad smpquery portinfo 1 1)
check "smpquery portinfo 1 1: the SM's port has IsSM" has "$out" 'IsSM$'
out=$(vmad ibnetdiscover)
check "ibnetdiscover: two CAs and the switch, with their LIDs" \
  bash -c '[ "$(grep -c "^caguid=" <<<"$1")" = 2 ] && grep -q "^Switch.*\"vmadsw0\" base port 0 lid 3" <<<"$1"' _ "$out"
out=$(vmad iblinkinfo)
check "iblinkinfo: both links Active from both ends" \
  bash -c '[ "$(grep -c "Active/  LinkUp" <<<"$1")" = 4 ]' _ "$out"
vmad ibnetdiscover -p >"$work/ports"
check "ibroute: the switch's LFT reaches every LID" lft_walk "$work/ports"
out=$(vmad perfquery -x 3 1)
check "perfquery -x 3 1: the switch port counted the SM's traffic" \
  bash -c 'awk -F. "/^PortXmitPkts:/ { n = \$NF } END { exit !(n > 0) }" <<<"$1"' _ "$out"
# Each process has its own fabric, so a reset can be read back only by the process that sent
# it: capi/tests/pma-readback.c, preloaded into perfquery -R, reads the port's PortCounters
# (as perfquery does) before perfquery's main and after its exit.
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$work/pma-readback.so" capi/tests/pma-readback.c -libumad
out=$(PMA_READBACK="3 1" vmad env LD_PRELOAD="$work/pma-readback.so" perfquery -R 3 1)
check "perfquery -R 3 1: exits 0, and its process reads the data counters back cleared" \
  reset_read_back $? "$out"
out=$(vmad ibqueryerrors --skip-sl)
check "ibqueryerrors: 3 nodes, none bad" has "$out" '3 nodes checked, 0 bad nodes found'
out=$(VMAD_SIM_FAULTS="loss=0.3,seed=3" vmad ibqueryerrors --skip-sl)
check "ibqueryerrors: frames lost on vmadsim1's link show as PortRcvErrors" \
  has "$out" 'GUID 0x766d616400000300 port 2: \[PortRcvErrors == [1-9]'
# An OpenSM-style program: it opens the issm path, the built-in SM steps aside, OpenSM
# configures the subnet with its own SubnSets through the nodes' SMAs.
mkdir -p "$work/osm"
printf 'force_log_flush TRUE\n' >"$work/osm/opensm.conf"
(cd "$work/osm" && OSM_CACHE_DIR=$work/osm OSM_TMP_DIR=$work/osm \
  vmad opensm -F "$work/osm/opensm.conf" -o -f "$work/osm/opensm.log" >/dev/null)
check "opensm -o on the embedded fabric: SUBNET UP, no ERR" \
  bash -c 'grep -q "SUBNET UP" "$1" && ! grep -q " ERR " "$1"' _ "$work/osm/opensm.log"
vmad saquery -N >"$work/sa"
check "saquery -N: three NodeRecords" test "$(grep -c "^NodeRecord dump:" "$work/sa")" = 3
vmad saquery -p >"$work/sa"
# Every ordered pair of the three LIDs (the switch's port 0 included).
check "saquery -p: 9 PathRecords" test "$(grep -c "^PathRecord dump:" "$work/sa")" = 9

for topo in "$@"; do
  topo=$(realpath "$topo")
  nodes=$(grep -cE '^(Hca|Switch)' "$topo")
  echo "== $topo ($nodes nodes)"
  export VMAD_SIM_TOPO=$topo
  out=$(vmad sminfo)
  check "sminfo: MASTER" has "$out" 'SMINFO_MASTER'
  vmad ibnetdiscover >"$work/disc"
  grep -oE '^(switchguid|caguid)=0x[0-9a-f]+' "$work/disc" | sed 's/.*=//' | sort >"$work/guids.vmad"
  check "ibnetdiscover: $nodes nodes" test "$(wc -l <"$work/guids.vmad")" = "$nodes"
  if command -v ibsim >/dev/null; then
    env_file=$work/ibsim.env
    if (unset VMAD_SIM_TOPO; "$root/scripts/ibsim-start" "$topo" >"$env_file" </dev/null); then
      run=$(. "$env_file"; echo "$VMAD_IBSIM_RUN")
      (unset VMAD_SIM_TOPO; "$root/scripts/ibsim-exec" "$run" ibnetdiscover 2>/dev/null) |
        grep -oE '^(switchguid|caguid)=0x[0-9a-f]+' | sed 's/.*=//' | sort >"$work/guids.ibsim"
      "$root/scripts/ibsim-stop" "$run" >/dev/null 2>&1
      check "ibnetdiscover: the same GUIDs as on ibsim" cmp -s "$work/guids.vmad" "$work/guids.ibsim"
    else
      check "ibsim-start" false
    fi
  else
    echo "skip: ibsim not installed: GUIDs not compared"
  fi
  vmad ibnetdiscover -p >"$work/ports"
  check "ibroute: every switch's LFT reaches every LID" lft_walk "$work/ports"
  out=$(vmad ibqueryerrors --skip-sl)
  check "ibqueryerrors: $nodes nodes, none bad" has "$out" "$nodes nodes checked, 0 bad nodes found"
  vmad saquery -N >"$work/sa"
  check "saquery -N: $nodes NodeRecords" test "$(grep -c "^NodeRecord dump:" "$work/sa")" = "$nodes"
  unset VMAD_SIM_TOPO
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
