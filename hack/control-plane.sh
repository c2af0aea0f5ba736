#!/usr/bin/env bash
# A real control plane for compatibility tests: Debian's etcd and an upstream kube-apiserver (built by
# hack/kube-binaries.sh), with certificates made here by openssl. By default on loopback, with no scheduler and
# no controller manager: tests create pods with spec.nodeName. With CONTROL_PLANE_CONTROLLERS=1 it also runs
# kube-controller-manager (node lifecycle, node IPAM, service accounts, ...) and kube-scheduler, as a kind
# control plane does; bin/nodecluster --control-plane kube-apiserver runs it so for a cluster of our nodes.
#
#   hack/control-plane.sh start                 # idempotent; prints the environment on stdout
#   hack/control-plane.sh stop                  # stops its processes by their PIDs; keeps the data
#   hack/control-plane.sh env                   # KEY=value lines (export ...) for a running control plane
#   hack/control-plane.sh node-kubeconfig NAME  # path of a kubeconfig for system:node:NAME, made when missing
#   hack/control-plane.sh reset                 # stop, then remove the data and certificates
#
# kube-apiserver runs with --authorization-mode=Node,RBAC and the NodeRestriction admission plugin, reaches
# kubelets by their Hostname address (start maps the test node's name to 127.0.0.1 in /etc/hosts, stop removes
# the line, so that the file stays the same while tests run) with its own client certificate, and writes an audit log of every request made by a node (group system:nodes).
# Everything lives in CONTROL_PLANE_DIR (/var/lib/nodeagent/control-plane); ports are free ones picked at the
# first start and kept while they stay free.
#
# Settings (environment):
#   CONTROL_PLANE_ADDRESS                   kube-apiserver's address (127.0.0.1); etcd stays on loopback
#   CONTROL_PLANE_KUBELET_ADDRESS_TYPES     how kube-apiserver reaches kubelets (Hostname)
#   CONTROL_PLANE_CONTROLLERS               1: also kube-controller-manager and kube-scheduler (0)
#   CONTROL_PLANE_CLUSTER_CIDR              the pods' network the controller manager cuts (10.244.0.0/16)
#   CONTROL_PLANE_NODE_CIDR_MASK_SIZE       each node's share of it (24)
#   CONTROL_PLANE_NODE_MONITOR_GRACE_PERIOD how long a silent node stays Ready (40s: the Lease duration)
set -euo pipefail

CP_DIR=${CONTROL_PLANE_DIR:-/var/lib/nodeagent/control-plane}
CP_NODE=${CONTROL_PLANE_NODE:-e2e-node}
KUBE_BIN_DIR=${KUBE_BIN_DIR:-/var/lib/nodeagent/bin}
SERVICE_CIDR=${CONTROL_PLANE_SERVICE_CIDR:-10.96.0.0/16}
SERVICE_IP=10.96.0.1 # the first address of SERVICE_CIDR: the kubernetes Service
ADDR=${CONTROL_PLANE_ADDRESS:-127.0.0.1}
KUBELET_ADDRESS_TYPES=${CONTROL_PLANE_KUBELET_ADDRESS_TYPES:-Hostname}
CONTROLLERS=${CONTROL_PLANE_CONTROLLERS:-0}
CLUSTER_CIDR=${CONTROL_PLANE_CLUSTER_CIDR:-10.244.0.0/16}
NODE_CIDR_MASK_SIZE=${CONTROL_PLANE_NODE_CIDR_MASK_SIZE:-24}
NODE_MONITOR_GRACE_PERIOD=${CONTROL_PLANE_NODE_MONITOR_GRACE_PERIOD:-40s}
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

PKI=$CP_DIR/pki
RUN=$CP_DIR/run
LOGS=$CP_DIR/log
APISERVER=$KUBE_BIN_DIR/kube-apiserver
CONTROLLER_MANAGER=$KUBE_BIN_DIR/kube-controller-manager
SCHEDULER=$KUBE_BIN_DIR/kube-scheduler
KUBECTL=$KUBE_BIN_DIR/kubectl

# Progress goes to stderr; stdout carries only what a command prints for its caller.
say() { printf 'control-plane: %s\n' "$*" >&2; }
die() { printf 'control-plane: error: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "run as root (sudo $0 $*)"
}

# ---- processes ----------------------------------------------------------------------------------------

# our_pid NAME prints the PID recorded for NAME when that process is still NAME started from CP_DIR. A
# process in the middle of an exec (setsid, then nice, then the binary) reads an empty command line for a
# moment: that is read again rather than taken for an exit.
our_pid() {
	local pid cmd i
	[ -f "$RUN/$1.pid" ] || return 1
	pid=$(cat "$RUN/$1.pid")
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	for i in 1 2 3 4 5 6 7 8 9 10; do
		[ -r "/proc/$pid/cmdline" ] || return 1
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
		[ -n "$cmd" ] && break
		sleep 0.1
	done
	case "$cmd" in *"$1 "*"$CP_DIR"*) echo "$pid" ;; *) return 1 ;; esac
}

stop_one() {
	local pid i
	if ! pid=$(our_pid "$1"); then
		rm -f "$RUN/$1.pid"
		return 0
	fi
	say "stopping $1 (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 100); do
		[ -d "/proc/$pid" ] || break
		sleep 0.1
	done
	if [ -d "/proc/$pid" ]; then
		say "$1 (pid $pid) did not stop in 10 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$RUN/$1.pid"
}

# ---- ports --------------------------------------------------------------------------------------------

port_in_use() {
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# free_port prints a TCP port nobody listens on, outside the ranges the tests and the kubelet use.
free_port() {
	local p i
	for i in $(seq 200); do
		p=$((20000 + RANDOM % 10000))
		if ! port_in_use "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "found no free port"
}

# load_ports sets ETCD_PORT, ETCD_PEER_PORT and APISERVER_PORT: the recorded ones, or new free ones (also
# when a recorded one is now taken by another process while ours is not running).
load_ports() {
	ETCD_PORT= ETCD_PEER_PORT= APISERVER_PORT=
	# shellcheck disable=SC1091
	[ -f "$CP_DIR/ports" ] && . "$CP_DIR/ports"
	if [ -z "$ETCD_PORT" ] || { ! our_pid etcd >/dev/null && port_in_use "$ETCD_PORT"; }; then
		ETCD_PORT=$(free_port)
	fi
	if [ -z "$ETCD_PEER_PORT" ] || { ! our_pid etcd >/dev/null && port_in_use "$ETCD_PEER_PORT"; }; then
		ETCD_PEER_PORT=$(free_port)
	fi
	if [ -z "$APISERVER_PORT" ] || { ! our_pid kube-apiserver >/dev/null && port_in_use "$APISERVER_PORT"; }; then
		APISERVER_PORT=$(free_port)
	fi
	printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPISERVER_PORT=%s\n' "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" \
		>"$CP_DIR/ports"
}

# ---- certificates -------------------------------------------------------------------------------------

# sign NAME SUBJECT EXTENSIONS makes PKI/NAME.key and PKI/NAME.crt signed by the CA, unless they exist.
sign() {
	local name=$1 subj=$2 ext=$3
	[ -s "$PKI/$name.crt" ] && [ -s "$PKI/$name.key" ] && return 0
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key" 2>/dev/null
	chmod 600 "$PKI/$name.key"
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	printf '%s\n' "$ext" >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null ||
		die "signing the $name certificate failed"
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

client_ext='basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

make_certs() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	if [ ! -s "$PKI/ca.crt" ] || [ ! -s "$PKI/ca.key" ]; then
		say "making the cluster CA"
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key" 2>/dev/null
		chmod 600 "$PKI/ca.key"
		openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=nodeagent-control-plane-ca" -days 3650 -sha256 \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
			-out "$PKI/ca.crt" 2>/dev/null || die "making the CA failed"
		# Everything signed by an earlier CA is stale.
		rm -f "$PKI"/apiserver.* "$PKI"/admin.* "$PKI"/apiserver-kubelet-client.* "$PKI"/node-*.* "$CP_DIR"/*.kubeconfig \
			"$PKI"/controller-manager.* "$PKI"/scheduler.*
	fi
	# The serving certificate names the address it is served on: made again when that changed.
	local sans="IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	[ "$ADDR" = 127.0.0.1 ] || sans="IP:$ADDR,$sans"
	if [ "$(cat "$PKI/apiserver.sans" 2>/dev/null)" != "$sans" ]; then
		rm -f "$PKI"/apiserver.crt "$PKI"/apiserver.key
		printf '%s\n' "$sans" >"$PKI/apiserver.sans"
	fi
	sign apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$sans"
	sign admin "/O=system:masters/CN=kubernetes-admin" "$client_ext"
	sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
	# The users the bootstrap RBAC policy grants the controller manager's and the scheduler's rights.
	sign controller-manager "/CN=system:kube-controller-manager" "$client_ext"
	sign scheduler "/CN=system:kube-scheduler" "$client_ext"
	if [ ! -s "$PKI/sa.key" ] || [ ! -s "$PKI/sa.pub" ]; then
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
		chmod 600 "$PKI/sa.key"
		openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
}

# write_kubeconfig FILE USER CERT KEY writes a kubeconfig for the API server on APISERVER_PORT.
write_kubeconfig() {
	local file=$1 user=$2 cert=$3 key=$4
	umask 077
	cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nodeagent
  cluster:
    server: https://$ADDR:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$cert")
    client-key-data: $(base64 -w0 <"$key")
contexts:
- name: $user@nodeagent
  context:
    cluster: nodeagent
    user: $user
current-context: $user@nodeagent
EOF
	umask 022
	mv -f "$file.tmp" "$file"
}

# node_kubeconfig NAME makes the certificate and kubeconfig of node NAME and prints the kubeconfig's path.
node_kubeconfig() {
	local name=$1
	case "$name" in
	'' | *[!a-z0-9.-]*) die "node name must be a lower-case DNS name, got '$name'" ;;
	esac
	sign "node-$name" "/O=system:nodes/CN=system:node:$name" "$client_ext"
	write_kubeconfig "$CP_DIR/node-$name.kubeconfig" "system:node:$name" "$PKI/node-$name.crt" "$PKI/node-$name.key"
	echo "$CP_DIR/node-$name.kubeconfig"
}

# ---- start --------------------------------------------------------------------------------------------

ensure_etcd_installed() {
	command -v etcd >/dev/null && return 0
	say "installing Debian's etcd-server"
	apt-get update -qq >&2 || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2 || die "installing etcd-server failed"
	command -v etcd >/dev/null || die "etcd-server is installed but etcd is not on PATH"
}

ensure_binaries() {
	local want=(kube-apiserver) b missing=
	[ "$CONTROLLERS" = 1 ] && want+=(kube-controller-manager kube-scheduler)
	for b in kubectl "${want[@]}"; do
		[ -x "$KUBE_BIN_DIR/$b" ] || missing=1
	done
	if [ -n "$missing" ]; then
		say "building ${want[*]} and kubectl (the first build takes several minutes)"
		KUBE_BIN_DIR=$KUBE_BIN_DIR "$HACK_DIR/kube-binaries.sh" "${want[@]}" >/dev/null ||
			die "building ${want[*]} failed"
	fi
}

etcd_healthy() {
	curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'
}

apiserver_ready() {
	curl -fsS --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://$ADDR:$APISERVER_PORT/readyz" >/dev/null 2>&1
}

# wait_for NAME SECONDS CHECK waits until CHECK succeeds, failing with NAME's log tail if it exits first.
wait_for() {
	local name=$1 seconds=$2 check=$3 i
	for i in $(seq $((seconds * 5))); do
		if "$check"; then return 0; fi
		if ! our_pid "$name" >/dev/null; then
			tail -n 30 "$LOGS/$name.log" >&2 || true
			die "$name exited; its log is $LOGS/$name.log"
		fi
		sleep 0.2
	done
	tail -n 30 "$LOGS/$name.log" >&2 || true
	die "$name did not become ready in $seconds s; its log is $LOGS/$name.log"
}

start_etcd() {
	if our_pid etcd >/dev/null; then
		wait_for etcd 30 etcd_healthy
		return 0
	fi
	say "starting etcd on 127.0.0.1:$ETCD_PORT"
	mkdir -p "$CP_DIR/etcd"
	chmod 700 "$CP_DIR/etcd"
	# A lone member: --initial-cluster-state new is ignored once the data dir holds a member.
	setsid nice -n 5 etcd --name nodeagent --data-dir "$CP_DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "nodeagent=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
		--snapshot-count 10000 --quota-backend-bytes $((2 << 30)) \
		</dev/null >>"$LOGS/etcd.log" 2>&1 9>&- &
	echo $! >"$RUN/etcd.pid"
	wait_for etcd 30 etcd_healthy
}

write_audit_policy() {
	cat >"$CP_DIR/audit-policy.yaml" <<'EOF'
# Every request a node makes, one line each once it completes; nothing else.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
EOF
}

start_apiserver() {
	if our_pid kube-apiserver >/dev/null; then
		wait_for kube-apiserver 90 apiserver_ready
		return 0
	fi
	say "starting kube-apiserver on https://$ADDR:$APISERVER_PORT"
	write_audit_policy
	setsid nice -n 5 "$APISERVER" \
		--bind-address="$ADDR" --advertise-address="$ADDR" --secure-port="$APISERVER_PORT" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--kubelet-preferred-address-types="$KUBELET_ADDRESS_TYPES" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--endpoint-reconciler-type=none \
		--allow-privileged=true --profiling=false \
		--audit-policy-file="$CP_DIR/audit-policy.yaml" --audit-log-path="$LOGS/audit.log" \
		--audit-log-maxsize=100 --audit-log-maxbackup=1 \
		</dev/null >>"$LOGS/kube-apiserver.log" 2>&1 9>&- &
	echo $! >"$RUN/kube-apiserver.pid"
	wait_for kube-apiserver 90 apiserver_ready
}

# start_controllers starts kube-controller-manager and kube-scheduler, each with its own identity, without
# leader election and without serving (no ports to pick). The controller manager assigns pod CIDRs and runs
# the node lifecycle (Unknown after the grace period, the unreachable and not-ready taints, eviction).
start_controllers() {
	if ! our_pid kube-controller-manager >/dev/null; then
		say "starting kube-controller-manager (cluster CIDR $CLUSTER_CIDR, node monitor grace period $NODE_MONITOR_GRACE_PERIOD)"
		write_kubeconfig "$CP_DIR/controller-manager.kubeconfig" system:kube-controller-manager \
			"$PKI/controller-manager.crt" "$PKI/controller-manager.key"
		setsid nice -n 5 "$CONTROLLER_MANAGER" --kubeconfig="$CP_DIR/controller-manager.kubeconfig" \
			--secure-port=0 --leader-elect=false --use-service-account-credentials=true \
			--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
			--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
			--allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size="$NODE_CIDR_MASK_SIZE" \
			--service-cluster-ip-range="$SERVICE_CIDR" --node-monitor-grace-period="$NODE_MONITOR_GRACE_PERIOD" \
			</dev/null >>"$LOGS/kube-controller-manager.log" 2>&1 9>&- &
		echo $! >"$RUN/kube-controller-manager.pid"
	fi
	if ! our_pid kube-scheduler >/dev/null; then
		say "starting kube-scheduler"
		write_kubeconfig "$CP_DIR/scheduler.kubeconfig" system:kube-scheduler "$PKI/scheduler.crt" "$PKI/scheduler.key"
		setsid nice -n 5 "$SCHEDULER" --kubeconfig="$CP_DIR/scheduler.kubeconfig" --secure-port=0 --leader-elect=false \
			</dev/null >>"$LOGS/kube-scheduler.log" 2>&1 9>&- &
		echo $! >"$RUN/kube-scheduler.pid"
	fi
	sleep 1 # a flag either refuses at once
	local name
	for name in kube-controller-manager kube-scheduler; do
		if ! our_pid "$name" >/dev/null; then
			tail -n 30 "$LOGS/$name.log" >&2 || true
			die "$name exited; its log is $LOGS/$name.log"
		fi
	done
}

# bootstrap makes what a controller manager would for the default namespace: its default ServiceAccount and
# the kube-root-ca.crt ConfigMap, so that pods carry the kube-api-access volume kube-apiserver injects, as on
# any cluster (its admission plugin refuses pods whose ServiceAccount is missing).
bootstrap() {
	local i
	for i in $(seq 50); do
		if "$KUBECTL" --kubeconfig "$CP_DIR/admin.kubeconfig" get namespace default >/dev/null 2>&1; then break; fi
		sleep 0.2
	done
	"$KUBECTL" --kubeconfig "$CP_DIR/admin.kubeconfig" apply -f - >/dev/null <<'EOF' || die "creating the default ServiceAccount failed"
apiVersion: v1
kind: ServiceAccount
metadata:
  name: default
  namespace: default
EOF
	"$KUBECTL" --kubeconfig "$CP_DIR/admin.kubeconfig" -n default create configmap kube-root-ca.crt \
		--from-file=ca.crt="$PKI/ca.crt" --dry-run=client -o yaml |
		"$KUBECTL" --kubeconfig "$CP_DIR/admin.kubeconfig" apply -f - >/dev/null || die "publishing kube-root-ca.crt failed"
}

# The test node's name resolves to 127.0.0.1 for kube-apiserver's proxy to its kubelet: one line, marked,
# added once by start and removed by stop (tests that copy the host's /etc/hosts into a pod read it meanwhile).
HOSTS_MARK="# nodeagent control plane"
map_node_name() {
	case "$KUBELET_ADDRESS_TYPES" in Hostname*) ;; *) return 0 ;; esac
	awk -v n="$CP_NODE" '$1 == "127.0.0.1" { for (i = 2; i <= NF && $i !~ /^#/; i++) if ($i == n) found = 1 } END { exit !found }' \
		/etc/hosts && return 0
	if [ -n "$(tail -c1 /etc/hosts)" ]; then echo >>/etc/hosts; fi
	printf '127.0.0.1 %s %s\n' "$CP_NODE" "$HOSTS_MARK" >>/etc/hosts
}
# hosts_locked CMD...: runs CMD holding the lock every writer of /etc/hosts here takes (control planes of
# their own started and stopped side by side, the end-to-end tests' own lines), so that no rewrite loses a
# line another added meanwhile.
HOSTS_LOCK=/run/lock/nodeagent-hosts.lock
hosts_locked() {
	mkdir -p "$(dirname "$HOSTS_LOCK")"
	(
		flock 8
		"$@"
	) 8>"$HOSTS_LOCK"
}
unmap_node_name() {
	grep -qF "$HOSTS_MARK" /etc/hosts || return 0
	# In place: /etc/hosts may be a bind mount (a container's), which a rename would not replace.
	local kept
	kept=$(grep -vF "127.0.0.1 $CP_NODE $HOSTS_MARK" /etc/hosts || true)
	printf '%s\n' "$kept" >/etc/hosts
}

print_env() {
	cat <<EOF
export CONTROL_PLANE_DIR=$CP_DIR
export CONTROL_PLANE_URL=https://$ADDR:$APISERVER_PORT
export CONTROL_PLANE_KUBECONFIG=$CP_DIR/admin.kubeconfig
export CONTROL_PLANE_CA=$PKI/ca.crt
export CONTROL_PLANE_NODE=$CP_NODE
export CONTROL_PLANE_NODE_KUBECONFIG=$CP_DIR/node-$CP_NODE.kubeconfig
export CONTROL_PLANE_AUDIT_LOG=$LOGS/audit.log
EOF
}

cmd_start() {
	require_root start
	ensure_etcd_installed
	ensure_binaries
	mkdir -p "$CP_DIR" "$RUN" "$LOGS"
	exec 9>"$RUN/lock"
	flock 9
	load_ports
	make_certs
	write_kubeconfig "$CP_DIR/admin.kubeconfig" kubernetes-admin "$PKI/admin.crt" "$PKI/admin.key"
	node_kubeconfig "$CP_NODE" >/dev/null
	hosts_locked map_node_name
	start_etcd
	start_apiserver
	bootstrap
	if [ "$CONTROLLERS" = 1 ]; then start_controllers; fi
	say "ready: kubectl --kubeconfig $CP_DIR/admin.kubeconfig get nodes"
	print_env
}

cmd_stop() {
	require_root stop
	[ -d "$RUN" ] || return 0
	exec 9>"$RUN/lock"
	flock 9
	stop_one kube-scheduler
	stop_one kube-controller-manager
	stop_one kube-apiserver
	stop_one etcd
	hosts_locked unmap_node_name
}

cmd_env() {
	[ -f "$CP_DIR/ports" ] || die "not started: run hack/control-plane.sh start"
	# shellcheck disable=SC1091
	. "$CP_DIR/ports"
	our_pid kube-apiserver >/dev/null || die "kube-apiserver is not running: run hack/control-plane.sh start"
	print_env
}

cmd_node_kubeconfig() {
	[ -f "$CP_DIR/ports" ] || die "not started: run hack/control-plane.sh start"
	# shellcheck disable=SC1091
	. "$CP_DIR/ports"
	exec 9>"$RUN/lock"
	flock 9
	node_kubeconfig "$1"
}

cmd_reset() {
	cmd_stop
	say "removing $CP_DIR"
	rm -rf "$CP_DIR"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
node-kubeconfig)
	[ $# -eq 2 ] || die "usage: $0 node-kubeconfig NAME"
	cmd_node_kubeconfig "$2"
	;;
reset) cmd_reset ;;
*)
	echo "usage: $0 start | stop | env | node-kubeconfig NAME | reset" >&2
	exit 2
	;;
esac
