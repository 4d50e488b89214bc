# Sourced by the rxe VM benchmarks (scripts/bench-hybrid, scripts/bench-rt-split), inside
# the guest: ibv_ud_pingpong on rxe1 as the server of a bare UD round trip, the rig's floor.

# Whether a TCP socket listens on port $1 (the server, before its client connects).
listening() {
  local hex
  hex=$(printf ':%04X$' "$1")
  awk -v p="$hex" '$2 ~ p && $4 == "0A" {found = 1} END {exit !found}' /proc/net/tcp /proc/net/tcp6
}

# ud_pingpong_server N: start the server for N round trips of 256 B on port
# $ud_pingpong_port and return once it listens; its pid is in $ud_pingpong_server_pid
# (`wait` for it after the client's run).
ud_pingpong_port=18515
ud_pingpong_server() {
  ibv_ud_pingpong -d "$RXE1_DEV" -i "$RXE1_PORT" -g "$RXE0_GID_INDEX" -s 256 -n "$1" \
    -p $ud_pingpong_port >/dev/null 2>&1 &
  ud_pingpong_server_pid=$!
  until listening $ud_pingpong_port; do
    kill -0 "$ud_pingpong_server_pid" 2>/dev/null || { echo "ibv_ud_pingpong server died" >&2; exit 1; }
    sleep 0.05
  done
}

# ud_pingpong_client N: the client of that server on rxe0 (its output is
# ibv_ud_pingpong's).
ud_pingpong_client() {
  ibv_ud_pingpong -d "$RXE0_DEV" -i "$RXE0_PORT" -g "$RXE0_GID_INDEX" -s 256 -n "$1" \
    -p $ud_pingpong_port localhost
}
