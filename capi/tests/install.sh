#!/usr/bin/env bash
# scripts/install, checked as a user would meet it, in throw-away prefixes:
#  - the layout: vmad, with-vmad, the library and libibumad.pc in the private
#    lib/vmad, rdma-core's seven umad headers, man pages, completions; nothing in lib/
#    itself where it would shadow rdma-core's library;
#  - pkg-config --cflags --libs libibumad builds rdma-core's own
#    compile test of the umad headers (from scripts/rdma-core's sources) against vmad's headers,
#    and a small client (install/client.c) that, run through with-vmad and through
#    LD_LIBRARY_PATH=$(pkg-config --variable=libdir), loads the installed vmad library
#    (its path, and vmadsim0 among the CAs);
#  - man -l renders vmad(1), a subcommand's page and libibumad-vmad(7);
#    dot -Tpng renders `vmad discover --dot`; bash parses the completion script;
#  - --destdir stages with the real prefix inside; --uninstall leaves nothing behind.
# Usage: capi/tests/install.sh [--release]   (default: the debug build, to save a rebuild)
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=(--debug)
[ "${1:-}" = --release ] && profile=()
out=${CARGO_TARGET_DIR:-target}/vmad-install-test
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
prefix=$(mktemp -d)
stage=$(mktemp -d)
trap 'rm -rf "$prefix" "$stage"' EXIT
status=0
step() { printf -- '-- %s\n' "$*"; }
fail() {
  echo "FAIL: $*"
  status=1
}

step "scripts/install --prefix $prefix"
scripts/install "${profile[@]}" --prefix "$prefix"
for f in bin/vmad bin/with-vmad lib/vmad/libibumad.so.3 lib/vmad/libibumad.so \
  lib/vmad/pkgconfig/libibumad.pc share/man/man1/vmad.1 share/man/man1/vmad-ping.1 \
  share/man/man7/libibumad-vmad.7 share/bash-completion/completions/vmad \
  share/zsh/site-functions/_vmad share/fish/vendor_completions.d/vmad.fish \
  share/doc/vmad/LICENSE-MIT share/doc/vmad/LICENSE-APACHE; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
for h in umad.h umad_types.h umad_sa.h umad_sa_mcm.h umad_sm.h umad_cm.h umad_str.h; do
  [ -f "$prefix/include/vmad/infiniband/$h" ] || fail "header not installed: $h"
done
shadow=$(ls -d "$prefix"/lib/libibumad* "$prefix"/lib/pkgconfig 2>/dev/null || true)
[ -z "$shadow" ] || fail "installed where it would shadow rdma-core: $shadow"
soname=$(objdump -p "$prefix/lib/vmad/libibumad.so.3" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libibumad.so.3 ] || fail "SONAME is $soname"

step "pkg-config libibumad from the installed prefix"
export PKG_CONFIG_PATH=$prefix/lib/vmad/pkgconfig
cflags=$(pkg-config --cflags libibumad | sed 's/ *$//')
libs=$(pkg-config --libs libibumad | sed 's/ *$//')
libdir=$(pkg-config --variable=libdir libibumad)
echo "cflags: $cflags | libs: $libs"
[ "$cflags" = "-I$prefix/include/vmad" ] || fail "--cflags: $cflags"
[ "$libdir" = "$prefix/lib/vmad" ] || fail "libdir: $libdir"

step "rdma-core's umad compile test against the installed headers"
src=$(scripts/rdma-core src)
# It includes rdma-core's build-tree <config.h> (nothing it uses) and <ccan/build_assert.h>
# (from the same source tree).
mkdir -p "$out/stub"
: >"$out/stub/config.h"
# shellcheck disable=SC2086
if cc -std=gnu11 -Wall -Werror -I "$out/stub" $cflags -idirafter "$src" -MD -MF "$out/compile_test.d" \
  -o "$out/umad_compile_test" "$src/libibumad/tests/umad_compile_test.c" $libs; then
  for h in umad.h umad_types.h umad_sm.h umad_sa.h umad_cm.h; do
    grep -q "$prefix/include/vmad/infiniband/$h" "$out/compile_test.d" ||
      fail "umad_compile_test.c did not take vmad's $h"
  done
  if LD_LIBRARY_PATH=$libdir "$out/umad_compile_test"; then
    echo "umad_compile_test: built with vmad's headers and ran: ok"
  else
    fail "umad_compile_test exited $?"
  fi
else
  fail "umad_compile_test.c does not build against vmad's installed headers"
fi

step "a client built through pkg-config loads the installed library"
# shellcheck disable=SC2086
cc -std=gnu11 -Wall -Werror $cflags -o "$out/client" capi/tests/install/client.c $libs -ldl
check_client() { # how, the client's output
  local text=$2
  echo "$text" | sed "s/^/  [$1] /"
  echo "$text" | grep -qx "library $prefix/lib/vmad/libibumad.so.3" ||
    fail "$1: the client did not load $prefix/lib/vmad/libibumad.so.3"
  echo "$text" | grep -qx "ca vmadsim0" || fail "$1: no vmadsim0 among the CAs"
  echo "$text" | grep -q "^port vmadsim0 1 lid 1$" || fail "$1: port vmadsim0 1 not opened with LID 1"
}
check_client with-vmad "$(env -u VMAD_TRANSPORT "$prefix/bin/with-vmad" "$out/client")"
check_client LD_LIBRARY_PATH "$(env -u VMAD_TRANSPORT LD_LIBRARY_PATH="$libdir" "$out/client")"

step "man pages render"
export MANPAGER=cat MANWIDTH=80
# Each page whole before grep: `man | grep -q` under pipefail fails whenever grep's early
# exit (at the match) cuts man off with SIGPIPE.
page() { man -l "$1" 2>/dev/null; }
grep -q "Exit status" <<<"$(page "$prefix/share/man/man1/vmad.1")" || fail "vmad.1: no exit status table"
grep -q -- "--transport" <<<"$(page "$prefix/share/man/man1/vmad.1")" || fail "vmad.1: no --transport"
grep -q -- "--dot" <<<"$(page "$prefix/share/man/man1/vmad-discover.1")" || fail "vmad-discover.1: no --dot"
grep -q "DIFFERENCES FROM RDMA-CORE" <<<"$(page "$prefix/share/man/man7/libibumad-vmad.7")" ||
  fail "libibumad-vmad.7 does not render"
echo "man -l: vmad.1, vmad-discover.1, libibumad-vmad.7: ok"

step "vmad discover --dot renders with dot -Tpng"
"$prefix/bin/vmad" --transport sim discover --dot >"$out/fabric.dot"
dot -Tpng -o "$out/fabric.png" "$out/fabric.dot"
[ "$(head -c 8 "$out/fabric.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "dot wrote no PNG"
grep -c -- ' -- ' "$out/fabric.dot" | grep -qx 2 || fail "the demo fabric's dot graph does not have its 2 links"

step "bash parses the completion script"
bash -n "$prefix/share/bash-completion/completions/vmad" || fail "bash completion does not parse"

step "--uninstall leaves nothing behind"
scripts/install --uninstall --prefix "$prefix"
left=$(find "$prefix" -mindepth 1)
[ -z "$left" ] || fail "left after uninstall: $left"

step "--destdir stages with the real prefix inside"
scripts/install "${profile[@]}" --destdir "$stage" --prefix /opt/vmad-test >/dev/null
grep -qx "prefix=/opt/vmad-test" "$stage/opt/vmad-test/lib/vmad/pkgconfig/libibumad.pc" ||
  fail "staged libibumad.pc does not name the real prefix"
grep -qx "ca vmadsim0" <<<"$(env -u VMAD_TRANSPORT "$stage/opt/vmad-test/bin/with-vmad" "$out/client")" ||
  fail "staged with-vmad does not find its library"
scripts/install --uninstall --destdir "$stage" --prefix /opt/vmad-test >/dev/null
# (The prefix directory itself stays, as it would for /usr/local.)
left=$(find "$stage" -mindepth 1 -not -path "$stage/opt" -not -path "$stage/opt/vmad-test")
[ -z "$left" ] || fail "left after staged uninstall: $left"

[ $status = 0 ] && echo "install: all passed"
exit $status
