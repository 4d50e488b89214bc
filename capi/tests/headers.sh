#!/usr/bin/env bash
# vmad's <infiniband/umad*.h> against the system's (rdma-core's, from libibumad-dev):
#  - every struct's size, alignment and field offsets, and what the inline helpers
#    return (headers/layout.c, built once against each set, outputs diffed);
#  - every enum constant and macro the system headers define exists in vmad's with
#    the same value, and every function they declare or define inline is there too
#    (a C program generated from the system headers' names, built against vmad's).
# Usage: capi/tests/headers.sh [SYSTEM_INCLUDE_DIR]   (default /usr/include)
set -euo pipefail
cd "$(dirname "$0")/../.."
sys=${1:-/usr/include}
out=${CARGO_TARGET_DIR:-target}/vmad-headers
mkdir -p "$out"
headers=(umad.h umad_types.h umad_sa.h umad_sa_mcm.h umad_sm.h umad_cm.h umad_str.h)
status=0

for h in "${headers[@]}"; do
  [ -f "capi/include/infiniband/$h" ] || { echo "FAIL: vmad has no <infiniband/$h>"; status=1; }
done

cc -std=gnu11 -Wall -Werror -Wno-deprecated-declarations -I "$sys" -o "$out/layout-system" capi/tests/headers/layout.c
cc -std=gnu11 -Wall -Werror -Wno-deprecated-declarations -I capi/include -o "$out/layout-vmad" capi/tests/headers/layout.c
if diff -u <("$out/layout-system") <("$out/layout-vmad"); then
  echo "headers: $(grep -c '^\s*[SO](' capi/tests/headers/layout.c) sizes/offsets and the inline helpers match the system's: ok"
else
  echo "FAIL: struct layouts or inline helpers differ from $sys/infiniband"
  status=1
fi

# The system headers' names: enum constants and object-like macros (values compared),
# functions (declared, or static inline).
paths=("${headers[@]/#/$sys/infiniband/}")
consts=$(grep -hoE '^\s*[A-Z][A-Z0-9_]+\s*=|^#define\s+[A-Za-z_][A-Za-z0-9_]*(\s|$)' "${paths[@]}" |
  sed -E 's/#define\s+//; s/\s*=//; s/\s+//g' | grep -vE '^_UMAD(_[A-Z]+)*_H$|^(ntohll|htonll)$' | sort -u)
funcs=$(grep -hoE '\b(umad_[a-z0-9_]+|ntohll|htonll)\s*\(' "${paths[@]}" | tr -d ' (' | sort -u)
gen="$out/names.c"
{
  echo '#include <stdio.h>'
  echo '#include <stdint.h>'
  echo '#include <sys/ioctl.h>'
  for h in "${headers[@]}"; do echo "#include <infiniband/$h>"; done
  echo 'static void pi(const char *n, long long v) { printf("%s %lld\n", n, v); }'
  echo 'static void ps(const char *n, const char *v) { printf("%s \"%s\"\n", n, v); }'
  echo '#define V(n) _Generic((n), char *: ps, const char *: ps, default: pi)(#n, n)'
  echo '#define F(n) printf("%s %d\n", #n, (void *)(uintptr_t)&n != 0)'
  echo 'int main(void) {'
  for c in $consts; do
    case $c in
    # ioctl numbers over the kernel's request structs, which neither header defines:
    # compared as spellings.
    IB_USER_MAD_REGISTER_AGENT | IB_USER_MAD_REGISTER_AGENT2)
      echo "#ifndef $c"
      echo "#error $c undeclared"
      echo "#endif"
      echo "  puts(\"$c defined\");"
      ;;
    *) echo "  V($c);" ;;
    esac
  done
  for f in $funcs; do echo "  F($f);"; done
  echo '  return 0; }'
} >"$gen"
n_consts=$(wc -w <<<"$consts")
n_funcs=$(wc -w <<<"$funcs")
cc -std=gnu11 -Wno-deprecated-declarations -I "$sys" -o "$out/names-system" "$gen"
if ! cc -std=gnu11 -Wno-deprecated-declarations -I capi/include -o "$out/names-vmad" "$gen" 2>"$out/names-vmad.err"; then
  echo "FAIL: names the system headers define are missing from vmad's:"
  grep -oE "[‘'][A-Za-z_0-9]+[’'] undeclared" "$out/names-vmad.err" | sort -u | sed 's/^/  /' || cat "$out/names-vmad.err"
  status=1
elif diff -u <("$out/names-system") <("$out/names-vmad"); then
  echo "headers: $n_consts constants and macros (same values) and $n_funcs functions of $sys/infiniband defined by vmad's: ok"
else
  echo "FAIL: constant values differ from $sys/infiniband"
  status=1
fi
exit $status
