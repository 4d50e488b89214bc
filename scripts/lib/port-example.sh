# examples/port_instructions.rs, built at a revision: sourced by scripts/port-instructions
# and scripts/port-compare. ROOT must be the repository's root.

# port_example_bin REV: build the example at REV ("work": the work tree) and print the
# binary's path. A revision is checked out in a worktree under target/bench-compare/
# (shared with scripts/bench-compare, kept between runs); one that predates the example
# gets the work tree's copy.
port_example_bin() {
  local dir=$ROOT
  if [ "$1" != work ]; then
    local rev
    rev=$(git -C "$ROOT" rev-parse --verify "$1^{commit}") || { echo "no such revision: $1" >&2; return 2; }
    dir=$ROOT/target/bench-compare/$rev
    if [ ! -d "$dir" ]; then
      mkdir -p "$(dirname "$dir")"
      git -C "$ROOT" worktree add --detach "$dir" "$rev" >/dev/null
    fi
    [ -f "$dir/examples/port_instructions.rs" ] || cp "$ROOT/examples/port_instructions.rs" "$dir/examples/"
  fi
  (cd "$dir" && cargo build -q --release --example port_instructions >&2) || return 2
  echo "$dir/target/release/examples/port_instructions"
}
