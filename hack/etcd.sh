#!/usr/bin/env bash
# Makes sure Debian's etcd (package etcd-server) is installed, and prints the path of its etcd binary on stdout.
# The benchmark's kube-apiserver reference (go run ./hack/bench apiserver --with-kube-apiserver) runs it in a
# temporary directory of its own, on loopback ports it picks; this script starts nothing.
set -euo pipefail

say() { printf 'etcd: %s\n' "$*" >&2; }
die() { printf 'etcd: error: %s\n' "$*" >&2; exit 1; }

if ! command -v etcd >/dev/null 2>&1; then
	[ "$(id -u)" -eq 0 ] || die "etcd is not installed; run as root to install Debian's etcd-server"
	say "installing Debian's etcd-server"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends etcd-server >&2; then
		apt-get update >&2
		apt-get install -y --no-install-recommends etcd-server >&2 || die "apt-get install etcd-server failed"
	fi
fi
command -v etcd
