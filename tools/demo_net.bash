# The demo's private network, sourced by tools/demo: N network namespaces, each
# with one veth link (eth0) to a bridge in a namespace of its own, so the
# machine's own namespace gets no address, route or link. The addresses are in
# the first 10.X.Y.0/24 (X from 200) that no route of the machine overlaps; no
# namespace has a default route, and net_check refuses a namespace that routes
# anywhere but that /24 or lo. Names are corral-demo-<pid>-...: net_remove
# deletes ours, and net_create first those of demos whose process is gone.
# Needs root and `ip netns` (net_unavailable says why not).

NET_PREFIX=corral-demo-
NET_TAG=$NET_PREFIX$$-
NET_SUBNET=""  # 10.X.Y, once net_create has chosen it

# Why namespaces cannot be used here, or nothing.
net_unavailable() {
  [ "$(id -u)" -eq 0 ] || { echo "not root"; return; }
  command -v nsenter >/dev/null || { echo "no nsenter"; return; }
  local err
  err=$(ip netns add "${NET_TAG}probe" 2>&1) || { echo "ip netns unavailable: $err"; return; }
  ip netns del "${NET_TAG}probe"
}

net_ns() { echo "$NET_TAG$1"; }                 # node i's namespace
net_address() { echo "$NET_SUBNET.$1"; }        # node i's address (i from 1)
net_exec() { echo nsenter --net=/run/netns/"$(net_ns "$1")" --; }  # argv prefix: run inside node i
# nsenter, not `ip netns exec`: that one also mounts a fresh /sys, without the
# cgroup mounts corrald needs.

# Removes the namespaces of demo `pid` (default: ours) with their processes.
net_remove() {
  local pid=${1:-$$} ns p
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns == "$NET_PREFIX$pid-"* ]] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

# Removes what demos killed before their cleanup left behind.
net_remove_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^$NET_PREFIX([0-9]+)- ]] || continue
    pid=${BASH_REMATCH[1]}
    kill -0 "$pid" 2>/dev/null || net_remove "$pid"
  done
}

# The first 10.X.Y (X from 200) whose /24 no IPv4 route of this machine overlaps.
net_free_subnet() {
  local routes=() dst net a b c d len x y r rlen common mask clash
  while read -r dst _; do
    case $dst in local|broadcast|unicast|multicast|anycast|default|"") continue ;; esac
    [[ $dst == */* ]] || dst=$dst/32
    IFS=./ read -r a b c d len <<<"$dst"
    [[ $d =~ ^[0-9]+$ ]] || continue
    routes+=("$(((a << 24) | (b << 16) | (c << 8) | d)) $len")
  done < <(ip -4 route show table all | sed -E 's/^(local|broadcast|unicast|multicast|anycast) //')
  for ((x = 200; x < 255; x++)); do
    for ((y = 0; y < 255; y++)); do
      net=$(((10 << 24) | (x << 16) | (y << 8)))
      clash=0
      for r in "${routes[@]}"; do
        read -r r rlen <<<"$r"
        common=$((rlen < 24 ? rlen : 24))
        mask=$(((0xffffffff << (32 - common)) & 0xffffffff))
        ((common == 0)) && mask=0
        (((net & mask) == (r & mask))) && { clash=1; break; }
      done
      ((clash)) || { echo "10.$x.$y"; return; }
    done
  done
  echo "no free 10.X.Y.0/24: every one overlaps a route here" >&2
  return 1
}

# Nothing, when namespace i routes (IPv4 and IPv6, every table) only to our
# /24 or lo; else the first route that leads elsewhere.
net_check() {
  local ns line dst
  ns=$(net_ns "$1")
  while read -r line; do
    [ -n "$line" ] || continue
    dst=$(sed -E 's/^(local|broadcast|multicast|anycast) //' <<<"$line" | awk '{print $1}')
    if [ "$dst" != default ]; then
      [[ $line =~ \ dev\ lo( |$) ]] && continue
      case $dst in "$NET_SUBNET".* | fe80::* | ff00::/8) continue ;; esac
    fi
    echo "namespace $ns routes beyond $NET_SUBNET.0/24: '$line'"
    return 0
  done < <(ip -n "$ns" -4 route show table all; ip -n "$ns" -6 route show table all)
  return 0
}

# Makes n namespaces on one bridge and checks their routes; fails, naming the
# offending route, when one leads anywhere else.
net_create() {
  local n=$1 i ns hub why
  net_remove_stale
  NET_SUBNET=$(net_free_subnet)
  hub=$(net_ns hub)
  ip netns add "$hub"
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" link set br0 up
  for ((i = 1; i <= n; i++)); do
    ns=$(net_ns "$i")
    ip netns add "$ns"
    ip -n "$hub" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$hub" link set "p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(net_address "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  for ((i = 1; i <= n; i++)); do
    why=$(net_check "$i")
    [ -z "$why" ] || { echo "tools/demo: $why; refusing to run" >&2; return 1; }
  done
}
