#!/usr/bin/env bash
# corral console as a person uses it: a standalone corrald on an emulated node (no root, no
# cgroups), the console in a detached tmux of fixed size, keys sent and the screen read; each
# key's effect is checked through `corral stat --json` / `corral nodes --json`.
# Arguments: the build directory. SKIP (77) without tmux or jq.
set -uo pipefail
build=$1
corral=$build/tools/corral corrald=$build/agent/corrald
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed (tools/setup installs it)"; exit 77; }
command -v jq >/dev/null || { echo "SKIPPED: jq is not installed (tools/setup installs it)"; exit 77; }

dir=$(mktemp -d /tmp/corral-console.XXXXXX)
chmod 755 "$dir"  # the unprivileged console reaches the socket
sock=$dir/corrald.sock
tmx=(tmux -S "$dir/tmux.sock")
cleanup() {
  "${tmx[@]}" kill-server 2>/dev/null
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- screen:"; "${tmx[@]}" capture-pane -p -t "${2:-ui}" 2>/dev/null; exit 1; }

# Polls until `cond ARGS` holds, for at most 10 s.
await() {
  local what=$1
  shift
  for _ in $(seq 200); do "$@" && return 0; sleep 0.05; done
  fail "$what"
}
screen_has() { "${tmx[@]}" capture-pane -p -t "$1" | grep -qE -- "$2"; }
job_is() { [ "$("$corral" stat "$1" --json --socket "$sock" | jq -r "$2")" = "$3" ]; }
keys() { "${tmx[@]}" send-keys -t "$@"; }

printf 'project chip\nmember chip root\nalloc chip +0 3\n' > "$dir/plan"
"$corrald" --standalone --no-config --foreground --state-dir "$dir/state" --socket "$sock" --pub none \
  --cgroup-parent "corral-test-console-$$" --node-state-dir "$dir/node" --jobfs-root "$dir/jobfs" \
  --ckpt-root "$dir/ckpt" --log "$dir/corrald.log" --emulate cores=4,mem=8G --set fsync=no \
  --set pba=yes --set pba_plan="$dir/plan" --set pba_require_project=no &
daemon=$!
await "corrald did not come up: $(cat "$dir/corrald.log" 2>/dev/null)" "$corral" node --socket "$sock" >/dev/null 2>&1

printf '#!/bin/sh\n#CORRAL_EMULATE runtime=600s\n' > "$dir/job.sh"
submit() { (cd "$dir" && CORRAL_SOCKET=$sock "$corral" submit -l "ncpus=$1,walltime=900" -N "$2" "$dir/job.sh"); }
run1=$(submit 2 first) run2=$(submit 2 second) big=$(submit 4 big) || fail "submit"
await "job $big has no planned start" job_is "$big" '.planned_start != null' true

# Each console writes its exit status (a sanitizer's report at exit included) when it quits.
"${tmx[@]}" new-session -d -s ui -x 140 -y 30 "$corral console --interval 0.5 --socket $sock; echo \$? >$dir/ui.rc"
await "the console shows no node" screen_has ui "^> +[^ ]+ +up +4/4"
await "the console shows no running jobs" screen_has ui "^. $run2 +second +[^ ]+ +running"
await "the console shows no planned start" screen_has ui "^  $big +big +[^ ]+ +pending +4 [0-9]{2}:[0-9]{2}:[0-9]{2} resources"

# Hold the pending job (the queue's last row), then release it.
keys ui j j
await "the pending job is not selected" screen_has ui "^> $big "
keys ui h
await "hold not reported" screen_has ui "^hold $big: "
await "job $big is not held" job_is "$big" .wait_reason held
keys ui r
await "release not reported" screen_has ui "^release $big: "
await "job $big is still held" job_is "$big" '.wait_reason != "held"' true

# Cancel asks first: 'n' leaves the job, 'y' cancels it.
keys ui k k
await "the first job is not selected" screen_has ui "^> $run1 "
keys ui c
await "cancel does not ask" screen_has ui "^cancel job $run1\? \(y/n\)"
keys ui n Enter
await "no answer to 'n'" screen_has ui "^\(not cancelled\)"
job_is "$run1" .state running || fail "job $run1 was cancelled without a yes"
keys ui c y Enter
await "cancel not reported" screen_has ui "^cancel $run1: "
await "job $run1 did not end cancelled" job_is "$run1" .end_reason cancelled

# A change of this week's allocation, asked for on the status line.
week=$("$corral" alloc --json --socket "$sock" | jq -r .current_week)
allocated() { [ "$("$corral" alloc --json --socket "$sock" | jq -r --arg w "$week" \
  '.weeks[] | select(.project == "chip" and .week == $w) | .allocated')" = "$1" ]; }
await "the console shows no allocation" screen_has ui "^  chip +3 "
keys ui a
await "alloc set does not ask" screen_has ui "^alloc set PROJECT WEEK SLOTS:"
keys ui "chip $week 5" Enter
await "alloc set not reported" screen_has ui "^alloc set: chip $week 5"
await "the allocation did not change" allocated 5
await "the console shows the old allocation" screen_has ui "^  chip +5 "

# An unprivileged user's drain is corrald's to refuse; the console shows it and goes on.
if [ "$(id -u)" -eq 0 ]; then
  as_user="setpriv --reuid=nobody --regid=nogroup --clear-groups"
else
  as_user=""
fi
"${tmx[@]}" new-session -d -s user -x 140 -y 30 "$as_user $corral console --socket $sock; echo \$? >$dir/user.rc"
await "the user's console shows no node" screen_has user "^. +[^ ]+ +up "
keys user Tab d
await "drain does not ask for a reason" screen_has user "^drain [^ ]+, reason:"
keys user "maintenance" Enter
await "the refusal is not on the status line" screen_has user "^drain [^ ]+ refused: .*(root|operator)"
[ "$("$corral" nodes --json --socket "$sock" | jq -r '.[0].state')" = up ] || fail "the node was drained" user
keys user q
await "the user's console did not quit" test -s "$dir/user.rc"
[ "$(cat "$dir/user.rc")" = 0 ] || fail "the user's console exited $(cat "$dir/user.rc")"

# The operator drains the node from the first console.
keys ui Tab d
await "drain does not ask for a reason" screen_has ui "^drain [^ ]+, reason:"
keys ui "disk swap" Enter
await "the drain is not shown" screen_has ui "^> +[^ ]+ +drained .*disk swap"
[ "$("$corral" nodes --json --socket "$sock" | jq -r '.[0].reason')" = "disk swap" ] || fail "node not drained"
keys ui q
await "the console did not quit" test -s "$dir/ui.rc"
[ "$(cat "$dir/ui.rc")" = 0 ] || fail "the console exited $(cat "$dir/ui.rc")"
echo "PASS: corral console showed the node, jobs and plan; hold, release, cancel, alloc set and drain worked; a user's drain was refused"
