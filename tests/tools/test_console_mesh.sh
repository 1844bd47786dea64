#!/usr/bin/env bash
# corral console against a mesh, as an operator uses it: three agents on emulated nodes (each in
# a network namespace of its own when root, on loopback ports otherwise: the output says which),
# the console on a follower in a detached tmux. Read from the screen: the mesh, its coordinator
# and term, every node, a job submitted through another node. A drain keyed in the console is
# replicated (another node lists it); after a SIGKILL to the coordinator the screen names the
# next one. `corral stat` through a follower: the coordinator's planned start and wait reason of
# a pending job, and the -s and -u filters. Arguments: the source and build directories. SKIP (77) without tmux or jq.
set -uo pipefail
src=$1 build=$2
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed (tools/setup installs it)"; exit 77; }
command -v jq >/dev/null || { echo "SKIPPED: jq is not installed (tools/setup installs it)"; exit 77; }
CORRAL=$(realpath "$build/tools/corral") CORRALD=$(realpath "$build/agent/corrald")
source "$src/tools/demo_net.bash"
source "$src/tools/demo_mesh.bash"

WORK=$(mktemp -d /tmp/corral-console-mesh.XXXXXX)
chmod 755 "$WORK"
tmx=(tmux -S "$WORK/tmux.sock")
cleanup() {
  "${tmx[@]}" kill-server 2>/dev/null
  mesh_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- screen:"; "${tmx[@]}" capture-pane -p -t ui 2>/dev/null; exit 1; }

# Polls until `cond ARGS` holds, for at most 15 s.
await() {
  local what=$1
  shift
  for _ in $(seq 300); do "$@" && return 0; sleep 0.05; done
  fail "$what"
}
screen_has() { "${tmx[@]}" capture-pane -p -t ui | grep -qE -- "$1"; }
node_is() { [ "$(cli "$1" nodes --json 2>/dev/null | jq -r --arg n "$2" '.[] | select(.name == $n) | "\(.state) \(.reason)"')" = "$3" ]; }

mesh_network || exit 1
MESH_EMULATED=1  # the console is under test, not the cgroups: jobs are timers
mesh_configure
mkdir -p "$WORK/out"
for i in 1 2 3; do agent_start "$i"; done
lead=$(await_coordinator "1 2 3" 0)
term=$(mesh_field "$lead" term)
f=$((lead % 3 + 1)) other=$(((lead + 1) % 3 + 1))  # the console's node, and a third
echo "coordinator n$lead in term $term; the console on n$f"

"${tmx[@]}" new-session -d -s ui -x 140 -y 30 "$CORRAL console --interval 0.5 --socket $(sock "$f"); echo \$? >$WORK/ui.rc"
await "the title does not name the mesh and its coordinator" \
  screen_has "mesh demo +node n$f \(follower\) +coordinator n$lead +term $term "
for i in 1 2 3; do await "the console does not list node n$i up" screen_has "^. n$i +up +[0-9]+/2 "; done

# Three jobs fill the three nodes (2 cores each); a fourth waits for the first end.
run() { (cd "$WORK/out" && CORRAL_SOCKET=$(sock "$1") "$CORRAL" submit -N "$2" -l walltime=900,ncpus=2 \
  --wrap "#CORRAL_EMULATE runtime=600s") || fail "submit of $2 through n$1"; }
id=$(run "$other" far) && run "$lead" fill1 >/dev/null && run "$f" fill2 >/dev/null || fail "the first submissions"
await "job $id submitted through n$other is not shown running" screen_has "^. $id +far +[^ ]+ +running"
late=$(run "$other" late)
# The coordinator's plan reaches the follower's queue: the planned start and why it waits.
await "job $late is not shown waiting for cores with a planned start" \
  screen_has "^. $late +late +[^ ]+ +pending +2 [0-9]{2}:[0-9]{2}:[0-9]{2} resources"
why=$(cli "$other" stat "$late" --json | jq -r '"\(.wait_reason) \(.planned_start > now) \(.wait_detail)"')
[[ $why == "resources true waits for 2 cores on one node (0 free) held by running jobs" ]] ||
  fail "corral stat on n$other says of job $late: $why"
[ "$(cli "$other" stat -s pending --json | jq -r '[.[].id] | join(" ")')" = "$late" ] || fail "stat -s pending"
[ "$(cli "$other" stat -u nobody --json | jq length)" = 0 ] || fail "stat -u nobody lists root's jobs"

# The first node (the nodes pane's first row) drained from the console; the third node lists it.
keys() { "${tmx[@]}" send-keys -t ui "$@"; }
keys Tab d
await "drain does not ask for a reason" screen_has "^drain n1, reason:"
keys "rack work" Enter
await "n$other does not list n1 drained" node_is "$other" n1 "drained rack work"
await "the console does not show n1 drained" screen_has "^> n1 +drained .*rack work"

# The coordinator killed: the console, still on its node, names the next one, in a later term.
moved_on() {
  new=$("${tmx[@]}" capture-pane -p -t ui | sed -nE '1s/.*coordinator (n[1-3]) +term ([0-9]+) .*/\1 \2/p')
  [ -n "$new" ] && [ "${new%% *}" != "n$lead" ] && [ "${new##* }" -gt "$term" ]
}
kill -KILL "${MESH_PID[lead]}"
await "the console does not name a new coordinator in a term after $term" moved_on
keys q
await "the console did not quit" test -s "$WORK/ui.rc"
[ "$(cat "$WORK/ui.rc")" = 0 ] || fail "the console exited $(cat "$WORK/ui.rc")"
echo "PASS: corral console on n$f showed the mesh, its coordinator and term, every node, jobs of other nodes" \
  "and the coordinator's planned start;" \
  "its drain reached n$other; after n$lead's SIGKILL it named $new"
