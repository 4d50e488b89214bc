#!/usr/bin/env bash
# Builds vmad's libibumad and runs the C-side acceptance checks against it:
#  - the exported symbols and versions equal capi/libibumad.map (symbols.sh);
#  - struct layouts: the system <infiniband/umad.h>, vmad's capi/include and the Rust
#    definitions agree (layout.c, layout.expected, abi.rs's unit test);
#  - umad_test.c, compiled against the SYSTEM <infiniband/umad.h> and linked to vmad's
#    library, in an AddressSanitizer build and once under valgrind, plus its env modes;
#  - src/wait.c on its own against stand-ins for the Rust side (wait_unit.c);
#  - uninit.c: every buffer-filling call given fresh malloc memory, under ASan and valgrind;
#  - cancel.c: threads cancelled inside umad_recv, umad_poll and umad_send, under ASan;
#  - the same program built against vmad's own header through capi/libibumad.pc;
#  - vmad's whole umad*.h set against the system's (headers.sh).
# Usage: capi/tests/run-c-tests.sh [--no-valgrind]
set -euo pipefail
cd "$(dirname "$0")/../.."
valgrind=1
[ "${1:-}" = --no-valgrind ] && valgrind=0

cargo build -q -p vmad-capi
target=${CARGO_TARGET_DIR:-target}
lib="$target/debug/libibumad.so"
libdir="$target/debug/vmad-lib"
mkdir -p "$libdir"
ln -sf ../libibumad.so "$libdir/libibumad.so.3"
ln -sf ../libibumad.so "$libdir/libibumad.so"
out="$target/debug/vmad-ctests"
mkdir -p "$out"

status=0
step() { printf -- '-- %s\n' "$*"; }

step "symbols"
capi/tests/symbols.sh "$lib" || status=1

step "layout: system header, vmad header, Rust"
cc -o "$out/layout-system" capi/tests/c/layout.c
cc -I capi/include -o "$out/layout-vmad" capi/tests/c/layout.c
if "$out/layout-system" | diff -u capi/tests/c/layout.expected - &&
  "$out/layout-vmad" | diff -u capi/tests/c/layout.expected -; then
  echo "layout: system and vmad headers match layout.expected: ok"
else
  status=1
fi

step "headers: vmad's umad*.h against the system's (layouts, names, values)"
capi/tests/headers.sh || status=1

# Only the system header: no -I capi/include here.
cflags=(-std=gnu11 -Wall -Wextra -Wno-unused-parameter -g -O1)
link=(-L"$libdir" -libumad -lpthread -Wl,-rpath,"$(cd "$libdir" && pwd)")
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/umad_test-asan" \
  capi/tests/c/umad_test.c "${link[@]}"
cc "${cflags[@]}" -o "$out/umad_test" capi/tests/c/umad_test.c "${link[@]}"
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/robust-asan" \
  capi/tests/c/robust.c "${link[@]}"
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/opens-asan" \
  capi/tests/c/opens.c "${link[@]}"
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/uninit-asan" \
  capi/tests/c/uninit.c "${link[@]}"
cc "${cflags[@]}" -o "$out/uninit" capi/tests/c/uninit.c "${link[@]}"
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/cancel-asan" \
  capi/tests/c/cancel.c "${link[@]}"
# wait.c alone, against stand-ins for the Rust side (no library: it defines umad_recv/_poll).
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/wait_unit-asan" \
  capi/tests/c/wait_unit.c -lpthread
# ldd's whole output first: `ldd | grep -q` under pipefail fails whenever grep's early exit
# (at the match) cuts ldd off with SIGPIPE before its last lines, as it did in a flake hunt.
deps=$(ldd "$out/umad_test")
if ! grep -q "libibumad.so.3 => $(cd "$libdir" && pwd)" <<<"$deps"; then
  echo "FAIL: umad_test does not resolve libibumad.so.3 to vmad's library:"
  ldd "$out/umad_test"
  exit 1
fi

run() { # name, env..., -- cmd...
  local name=$1
  shift
  step "$name"
  if env "$@"; then :; else
    echo "FAIL: $name (exit $?)"
    status=1
  fi
}
unset VMAD_TRANSPORT VMAD_SIM_FAULTS
asan=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=0)
run "umad_test (ASan)" "${asan[@]}" "$out/umad_test-asan" main
run "robust: NULL/misaligned/short/closed/unregistered/double close/panic (ASan)" "${asan[@]}" "$out/robust-asan"
run "wait.c: a readable descriptor that never brings a message still times out (ASan)" "${asan[@]}" "$out/wait_unit-asan"
run "opens: several opens of one port, umad_poll(0) (ASan)" "${asan[@]}" "$out/opens-asan" sim
run "uninit: receive buffers, umad buffers and structs fresh from malloc (ASan)" "${asan[@]}" "$out/uninit-asan"
run "cancel: pthread_cancel in umad_recv(-1), umad_poll(-1), umad_send, 200 rounds (ASan)" "${asan[@]}" "$out/cancel-asan"
run "umad_test faults (ASan)" "${asan[@]}" VMAD_SIM_FAULTS=loss=1,seed=3 "$out/umad_test-asan" faults
run "umad_test lossy link (ASan)" "${asan[@]}" VMAD_SIM_FAULTS=loss=0.1,dup=0.05,reorder=0.1,seed=7 "$out/umad_test-asan" lossy
run "umad_test bad VMAD_TRANSPORT (ASan)" "${asan[@]}" VMAD_TRANSPORT=bogus "$out/umad_test-asan" badenv
run "umad_test VMAD_TRANSPORT=verbs (ASan)" "${asan[@]}" VMAD_TRANSPORT=verbs "$out/umad_test-asan" verbs
run "umad_test VMAD_TRANSPORT=roce without VMAD_ROCE_ADDR (ASan)" "${asan[@]}" VMAD_TRANSPORT=roce "$out/umad_test-asan" badenv
rm -f "$out"/capture*.pcap*
run "umad_test with VMAD_PCAP (ASan)" "${asan[@]}" VMAD_PCAP="$out/capture.pcap" "$out/umad_test-asan" lossy
step "VMAD_PCAP wrote a capture tshark reads without a malformed packet"
if [ ! -s "$out/capture.pcap" ]; then
  echo "FAIL: VMAD_PCAP: $out/capture.pcap missing or empty"
  status=1
elif command -v tshark >/dev/null; then
  frames=$(tshark -r "$out/capture.pcap" 2>/dev/null | wc -l)
  malformed=$(tshark -r "$out/capture.pcap" -Y _ws.malformed 2>/dev/null | wc -l)
  mads=$(tshark -r "$out/capture.pcap" -Y infiniband.mad 2>/dev/null | wc -l)
  echo "capture: $frames frames, $mads MADs, $malformed malformed"
  if [ "$frames" -eq 0 ] || [ "$malformed" -ne 0 ] || [ "$mads" -ne "$frames" ]; then
    echo "FAIL: VMAD_PCAP capture does not dissect cleanly"
    status=1
  fi
else
  echo "FAIL: tshark not installed (scripts/install-deps installs it)"
  status=1
fi
step "umad_test built with vmad's header through pkg-config"
# shellcheck disable=SC2046
cc "${cflags[@]}" -DUSE_VMAD_HEADER $(PKG_CONFIG_PATH=capi pkg-config --define-variable=libdir="$libdir" --cflags libibumad) \
  -o "$out/umad_test-pc" capi/tests/c/umad_test.c \
  $(PKG_CONFIG_PATH=capi pkg-config --define-variable=libdir="$libdir" --libs libibumad) -lpthread \
  -Wl,-rpath,"$(cd "$libdir" && pwd)"
run "umad_test (vmad header)" "$out/umad_test-pc" main
if [ $valgrind = 1 ]; then
  run "umad_test (valgrind)" valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no \
    --errors-for-leak-kinds=definite "$out/umad_test" main
  # Memcheck reports any byte uninit.c reads back that vmad did not write.
  run "uninit (valgrind)" valgrind -q --error-exitcode=99 --leak-check=full --show-possibly-lost=no \
    --errors-for-leak-kinds=definite "$out/uninit"
fi
[ $status = 0 ] && echo "C tests: all passed"
exit $status
