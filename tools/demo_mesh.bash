# The demo's mesh, sourced by tools/demo (after demo_net.bash): three corrald
# voters, keys from `corral keygen` and one shared allowed file, a workload
# submitted through every node, a SIGKILL to the coordinator midway, the
# election of the next one, the killed agent back, and every job checked to
# have run exactly once. Needs CORRAL, CORRALD (absolute paths) and WORK (an
# empty directory, removed by the caller).

MESH_N=3
MESH_JOBS=12        # in all: MESH_FIRST before the kill, the rest after it through the survivors
MESH_FIRST=8        # more than the 6 cores (2 a node), so some wait when the coordinator dies
MESH_JOB_S=3        # each job's run time
MESH_NETNS=0        # 1: each agent in a namespace of its own
MESH_EMULATED=0     # 1: agents on emulated nodes (not root: no cgroups), jobs are timers
MESH_ADDR=()        # host:port of agent i (from 1)
MESH_PID=()
MESH_IDS=()         # every id a submit answered

now_ms() { echo $(($(date +%s%N) / 1000000)); }
step() { echo; echo "== $*"; }
sock() { echo "$WORK/n$1/corrald.sock"; }
cli() { local i=$1; shift; "$CORRAL" --socket "$(sock "$i")" "$@"; }
mesh_field() { cli "$1" mesh --json 2>/dev/null | jq -r ".$2" 2>/dev/null || true; }
fail() { echo "tools/demo: $*" >&2; exit 1; }

# A TCP port P such that nothing on 127.0.0.1 listens on P or P + 1 (an agent's
# publish port), and neither is one we already chose.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    [[ " ${MESH_ADDR[*]} " == *":$p "* || " ${MESH_ADDR[*]} " == *":$((p - 1)) "* ||
       " ${MESH_ADDR[*]} " == *":$((p + 1)) "* ]] && continue
    [ -z "$(ss -Htln "( sport = :$p or sport = :$((p + 1)) )" 2>/dev/null)" ] && { echo "$p"; return; }
  done
}

# Namespaces when root and `ip netns` allow it, else loopback ports; says which.
mesh_network() {
  local why i
  why=$(net_unavailable)
  if [ -z "$why" ]; then
    MESH_NETNS=1  # first: the cleanup removes what a failing net_create made
    net_create "$MESH_N"
    for ((i = 1; i <= MESH_N; i++)); do MESH_ADDR[i]=$(net_address "$i"):7470; done
    echo "network: namespaces ($NET_TAG*, one per agent, on a bridge; $NET_SUBNET.0/24, no default route, routes checked)"
  else
    for ((i = 1; i <= MESH_N; i++)); do MESH_ADDR[i]=127.0.0.1:$(free_port); done
    echo "network: loopback (127.0.0.1 ports; no namespaces: $why)"
  fi
  if [ "$(id -u)" -ne 0 ]; then
    MESH_EMULATED=1
    echo "nodes: emulated (corrald --emulate; not root, so no cgroups: jobs are timers)"
  fi
}

# Each node's key pair (`corral keygen`), one allowed file and one config file
# that every node shares, as an admin sets up a rack (docs/mesh.md).
mesh_configure() {
  local i key voters=""
  echo "# the demo mesh's members: public key, voter address" >"$WORK/mesh_allowed_keys"
  for ((i = 1; i <= MESH_N; i++)); do
    mkdir -p "$WORK/n$i"
    key=$("$CORRAL" keygen --out "$WORK/n$i/keys" 2>/dev/null | head -1)
    [ ${#key} -eq 40 ] || fail "corral keygen gave no key for n$i"
    echo "$key ${MESH_ADDR[i]}  # n$i" >>"$WORK/mesh_allowed_keys"
    voters+=${voters:+, }${MESH_ADDR[i]}
  done
  cat >"$WORK/corrald.conf" <<EOF
mesh = demo
voters = $voters
mesh_allowed_keys = $WORK/mesh_allowed_keys
EOF
  echo "keys: corral keygen on each node, one shared allowed file ($MESH_N keys); voters: $voters"
}

# Starts agent i (its name, address and secret key on the command line, the
# rest from the shared file); waits until its socket answers.
agent_start() {
  local i=$1 d=$WORK/n$1 wrap=() node=(--declare-cores 2) deadline
  ((MESH_NETNS)) && read -ra wrap <<<"$(net_exec "$i")"
  ((MESH_EMULATED)) && node=(--emulate "cores=2,mem=4G,jobfs=16G")
  "${wrap[@]}" "$CORRALD" --config "$WORK/corrald.conf" --foreground "${node[@]}" \
    --set node_name="n$i" --set listen="${MESH_ADDR[i]}" --set mesh_key="$d/keys/mesh.key" \
    --state-dir "$d/state" --socket "$(sock "$i")" --pub "ipc://$d/events" --log "$d/corrald.log" \
    --node-state-dir "$d/node" --jobfs-root "$d/jobfs" --ckpt-root "$d/ckpt" \
    --cgroup-parent "${NET_TAG}n$i" &
  MESH_PID[i]=$!
  deadline=$(($(now_ms) + 10000))
  until cli "$i" mesh >/dev/null 2>&1; do
    kill -0 "${MESH_PID[i]}" 2>/dev/null || fail "corrald n$i exited at start: $(tail -3 "$d/corrald.log")"
    (($(now_ms) < deadline)) || fail "corrald n$i did not answer within 10 s"
    sleep 0.05
  done
}

# Waits until every agent in "$1" names the same coordinator, in a term above
# $2, and it says it leads; prints its number. One `corral mesh --json` of
# each agent a round, so that the time it takes is the election's.
await_coordinator() {
  local members=$1 above=$2 deadline who i t s c
  local -A state=()
  deadline=$(($(now_ms) + 15000))
  while (($(now_ms) < deadline)); do
    who=""
    for i in $members; do
      read -r t s c <<<"$(cli "$i" mesh --json 2>/dev/null | jq -r '"\(.term) \(.state) \(.coordinator)"' 2>/dev/null)"
      state[n$i]=$s
      [[ -n $c && ${t:-0} -gt $above && (-z $who || $c == "$who") ]] || { who=""; break; }
      who=$c
    done
    if [ -n "$who" ] && [ "${state[$who]:-}" = leader ]; then
      echo "${who#n}"
      return
    fi
    sleep 0.01
  done
  fail "no coordinator agreed on by members $members within 15 s"
}

# Submits job k through agent i; records its id.
submit() {
  local i=$1 k=$2 body id
  if ((MESH_EMULATED)); then body="#CORRAL_EMULATE runtime=${MESH_JOB_S}s"
  else body="echo \$CORRAL_JOBID >> $WORK/ran; sleep $MESH_JOB_S"; fi
  id=$(cd "$WORK/out" && CORRAL_SOCKET=$(sock "$i") "$CORRAL" submit -N "job$k" -l walltime=60,ncpus=1 --wrap "$body") ||
    fail "submit of job$k through n$i failed"
  MESH_IDS+=("$id")
}

# `corral stat --json` of agent i, filtered by jq expression $2.
stat_jq() { cli "$1" stat --json 2>/dev/null | jq -r "$2" 2>/dev/null || true; }

# Waits until agent i lists at least $2 jobs in state $3.
await_jobs() {
  local deadline n
  deadline=$(($(now_ms) + ${4:-60000}))
  while (($(now_ms) < deadline)); do
    n=$(stat_jq "$1" "[.[] | select(.state == \"$3\")] | length")
    ((${n:-0} >= $2)) && return
    sleep 0.1
  done
  fail "n$1 lists fewer than $2 jobs $3 after $((${4:-60000} / 1000)) s"
}

# One id a line for every run of a job: the lines the jobs wrote. On emulated
# nodes (timers, no processes) the completed runs agent $1 lists.
launches() {
  if ((MESH_EMULATED)); then
    stat_jq "$1" '.[] | .id as $id | .runs[] | select(.end_reason == "completed") | $id'
  else
    cat "$WORK/ran" 2>/dev/null || true
  fi
}

# Every id a submit answered ran exactly once (as agent $1 lists them, on
# emulated nodes) and ended completed, and nothing else ran.
check_exactly_once() {
  local bad=() id n runs again
  runs=$(launches "$1")
  for id in "${MESH_IDS[@]}"; do
    n=$(grep -cx "$id" <<<"$runs" || true)
    [ "$n" -eq 1 ] || bad+=("job $id ran $n times;")
  done
  for id in $(sort -un <<<"$runs"); do
    [[ " ${MESH_IDS[*]} " == *" $id "* ]] || bad+=("job $id ran, but no submit answered it;")
  done
  mapfile -t -O ${#bad[@]} bad < <(stat_jq "$1" '.[] | select(.end_reason != "completed") | "job \(.id) ended \(.end_reason);"')
  if [ ${#bad[@]} -gt 0 ]; then
    echo "NOT exactly once: ${bad[*]}"
    return 1
  fi
  if ((MESH_EMULATED)); then
    # An emulated node's timers die with its agent: their runs are given back, and run again.
    again=$(stat_jq "$1" '[.[] | select(any(.runs[]; .end_reason == "preempted")) | .id] | join(" ")')
    echo "every job completed exactly once: ${#MESH_IDS[@]} jobs${again:+ (emulated: the timers of jobs $again died with their agent and ran again)}"
  else
    echo "every job ran exactly once: ${#MESH_IDS[@]} jobs"
  fi
}

# Stops every agent we started and whatever runs in our namespaces and cgroups.
mesh_cleanup() {
  local p g
  for p in "${MESH_PID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 40); do
    p=0
    for g in "${MESH_PID[@]}"; do kill -0 "$g" 2>/dev/null && p=1; done
    ((p)) || break
    sleep 0.05
  done
  for p in "${MESH_PID[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  ((MESH_NETNS)) && net_remove
  for g in /sys/fs/cgroup/"${NET_TAG}"n* /sys/fs/cgroup/*/"${NET_TAG}"n*; do
    [ -d "$g" ] || continue
    while read -r p; do kill -9 "$p" 2>/dev/null || true; done < <(find "$g" -name cgroup.procs -exec cat {} + 2>/dev/null)
    find "$g" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  return 0
}

# The whole mesh part; fails (non-zero) unless every job ran exactly once.
mesh_demo() {
  local i lead term took t0 survivors=() k
  step "1. a mesh of $MESH_N agents on this machine"
  mesh_network
  mesh_configure
  mkdir -p "$WORK/out"
  for ((i = 1; i <= MESH_N; i++)); do agent_start "$i"; done
  lead=$(await_coordinator "$(seq -s ' ' "$MESH_N")" 0)
  echo "-- corral mesh (on n1)"
  cli 1 mesh

  step "2. $MESH_JOBS jobs of ${MESH_JOB_S} s, submitted through every node ($((2 * MESH_N)) cores in all)"
  for ((k = 1; k <= MESH_FIRST; k++)); do submit $(((k - 1) % MESH_N + 1)) "$k"; done
  echo "submitted through n1, n2, n3: ${MESH_IDS[*]}"
  await_jobs 1 4 running 15000
  echo "-- corral nodes"
  cli 1 nodes
  echo "-- corral stat"
  cli 1 stat

  step "3. SIGKILL to the coordinator, n$lead"
  term=$(mesh_field "$lead" term)
  for ((i = 1; i <= MESH_N; i++)); do ((i == lead)) || survivors+=("$i"); done
  t0=$(now_ms)
  kill -KILL "${MESH_PID[lead]}"
  wait "${MESH_PID[lead]}" 2>/dev/null || true
  k=$(await_coordinator "${survivors[*]}" "$term")
  took=$(($(now_ms) - t0))
  echo "-- corral mesh (on n${survivors[0]})"
  cli "${survivors[0]}" mesh
  echo "new coordinator: n$k in term $(mesh_field "$k" term) (was n$lead in term $term), named by both survivors ${took} ms after the kill"

  step "4. $((MESH_JOBS - MESH_FIRST)) more jobs through the survivors; n$lead restarts and rejoins"
  for ((k = MESH_FIRST + 1; k <= MESH_JOBS; k++)); do submit "${survivors[k % 2]}" "$k"; done
  echo "submitted through n${survivors[0]}, n${survivors[1]}: ${MESH_IDS[*]:MESH_FIRST}"
  agent_start "$lead"
  t0=$(now_ms)
  until [ "$(mesh_field "$lead" state)" = follower ] && [ -n "$(mesh_field "$lead" coordinator)" ]; do
    (($(now_ms) - t0 < 15000)) || fail "n$lead did not rejoin within 15 s"
    sleep 0.05
  done
  echo "n$lead is back: $(mesh_field "$lead" state) of $(mesh_field "$lead" coordinator), term $(mesh_field "$lead" term), from its raft files"

  step "5. every job ended, each exactly once"
  await_jobs "${survivors[0]}" "$MESH_JOBS" ended 60000
  stat_jq "${survivors[0]}" '"\(length) jobs ended: " + ([group_by(.end_reason)[] | "\(length) \(.[0].end_reason)"] | join(", "))
    + "; runs per node: " + ([[.[].runs[].comment | sub("^on "; "")] | group_by(.)[] | "\(.[0]) \(length)"] | join(", "))'
  check_exactly_once "${survivors[0]}"
}
