#!/usr/bin/env bash
# Checks that a built libibumad exports exactly the symbols of capi/libibumad.map, each at
# the version node the map gives it, and nothing else, with SONAME libibumad.so.3 and the
# map's version nodes defined. (GNU ld also emits each node as an ABS symbol; lld does not:
# those are skipped, the nodes are compared through the version definition section.)
# Usage: capi/tests/symbols.sh path/to/libibumad.so
set -euo pipefail
lib=${1:?usage: symbols.sh LIB}
map="$(dirname "$0")/../libibumad.map"

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
fail=0
if [ "$soname" != libibumad.so.3 ]; then
  echo "FAIL: SONAME is '$soname', want libibumad.so.3"
  fail=1
fi

# "name VERSION" for each global in the map, from the node that lists it.
want=$(awk '
  /^[A-Z0-9_.]+ *\{/ { node = $1; next }
  /global:/ { inglobal = 1; next }
  /local:/ { inglobal = 0; next }
  /^\}/ { inglobal = 0; next }
  inglobal && /;/ { gsub(/[ \t;]/, ""); if ($0 != "") print $0 " " node }
' "$map" | sort)

# "name VERSION" for each defined global/weak dynamic symbol; version nodes (ABS) apart.
got=$(readelf --dyn-syms -W "$lib" | awk 'NR > 3 && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $7 != "ABS" {
  n = $8; v = "(none)"
  if (index(n, "@@")) { v = substr(n, index(n, "@@") + 2); n = substr(n, 1, index(n, "@@") - 1) }
  else if (index(n, "@")) { v = substr(n, index(n, "@") + 1) " (non-default)"; n = substr(n, 1, index(n, "@") - 1) }
  print n " " v }' | sort)
nodes_want=$(awk '/^[A-Z0-9_.]+ *\{/ { print $1 }' "$map" | sort)
nodes_got=$(readelf -V -W "$lib" | sed -n '/Version definition/,/Version needs/p' |
  awk '/Name:/ && !/Flags: BASE/ { print $NF }' | sort)

if [ "$want" != "$got" ]; then
  echo "FAIL: exported symbols differ from $map (< map, > library):"
  diff <(echo "$want") <(echo "$got") || true
  fail=1
fi
if [ "$nodes_want" != "$nodes_got" ]; then
  echo "FAIL: version nodes differ (< map, > library):"
  diff <(echo "$nodes_want") <(echo "$nodes_got") || true
  fail=1
fi
n=$(echo "$want" | wc -l)
if [ $fail = 0 ]; then
  echo "symbols: $n symbols at their map versions, no others, SONAME $soname: ok"
fi
exit $fail
