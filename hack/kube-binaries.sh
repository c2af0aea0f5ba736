#!/usr/bin/env bash
# Builds upstream Kubernetes binaries from the Go module proxy at a pinned version:
# kubectl always, plus any of kube-apiserver, kube-scheduler, kube-controller-manager, kubelet and
# sample-device-plugin (upstream's test device plugin, test/images/sample-device-plugin, built static) and
# dra-test-driver (upstream's DRA test driver, test/e2e/dra/test-driver, built static) named as arguments,
# csi-attacher (kubernetes-csi's external-attacher, ATTACHER_VERSION, built static from its own module) and
# critest (cri-tools' CRI validation suite, CRITEST_VERSION, built from its own module).
#
#   hack/kube-binaries.sh                  # kubectl
#   hack/kube-binaries.sh kube-apiserver   # kubectl and kube-apiserver
#
# The build happens in a scratch module that requires k8s.io/kubernetes and replaces each staging module that
# kubernetes' own go.mod points at ./staging/... with its published v0.x release. A binary that already exists
# and was built from the pinned version is kept: a second run does nothing. The binaries land in
# /var/lib/nodeagent/bin (KUBE_BIN_DIR), never on PATH, so a kubectl already on the host is left alone.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
KUBE_BUILD_DIR=${KUBE_BUILD_DIR:-/var/lib/nodeagent/kube-build}
KUBE_BIN_DIR=${KUBE_BIN_DIR:-/var/lib/nodeagent/bin}
ATTACHER_VERSION=${ATTACHER_VERSION:-v4.13.0}
CRITEST_VERSION=${CRITEST_VERSION:-v1.37.0}
export PATH=/usr/local/go/bin:$PATH

# Progress goes to stderr; stdout carries only the paths of the binaries.
say() { printf 'kube-binaries: %s\n' "$*" >&2; }
die() { printf 'kube-binaries: error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed"
case "$KUBE_VERSION" in
v1.*.*) ;;
*) die "KUBE_VERSION must look like v1.N.M, got $KUBE_VERSION" ;;
esac
# Staging modules are published as v0.N.M for kubernetes v1.N.M.
STAGING_VERSION=v0.${KUBE_VERSION#v1.}

targets=(kubectl)
attacher=0
critest=0
for arg in "$@"; do
	case "$arg" in
	kubectl) ;;
	kube-apiserver | kube-scheduler | kube-controller-manager | kubelet | sample-device-plugin | dra-test-driver) targets+=("$arg") ;;
	csi-attacher) attacher=1 ;;
	critest) critest=1 ;;
	*) die "unknown binary $arg (want kubectl, kube-apiserver, kube-scheduler, kube-controller-manager, kubelet, sample-device-plugin, dra-test-driver, csi-attacher or critest)" ;;
	esac
done

# build_from_module NAME MODULE VERSION ENV... -- GO-ARGS... PACKAGE: builds NAME from its own module at VERSION as the
# module itself builds it (go install refuses a go.mod with replace directives), in a copy of the module's
# source. The version built is recorded beside the binary; an up-to-date binary is kept.
build_from_module() {
	local name=$1 module=$2 version=$3 bin=$KUBE_BIN_DIR/$1 json dir src start env=()
	shift 3
	while [ "$1" != -- ]; do
		env+=("$1")
		shift
	done
	shift
	if [ -x "$bin" ] && [ "$(cat "$bin.version" 2>/dev/null)" = "$version" ]; then
		say "$name $version is up to date"
		return
	fi
	json=$(go mod download -json "$module@$version") || die "cannot download $module $version from the module proxy"
	dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || die "no source for $module $version in the module cache"
	mkdir -p "$KUBE_BUILD_DIR" "$KUBE_BIN_DIR"
	src=$KUBE_BUILD_DIR/$name-src
	rm -rf "$src"
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	say "building $name $version"
	start=$(date +%s)
	(cd "$src" && env "${env[@]}" nice -n 10 go "${@:1:$#-1}" -o "$bin.tmp" "${@: -1}") || die "building $name failed"
	mv -f "$bin.tmp" "$bin"
	echo "$version" >"$bin.version"
	rm -rf "$src"
	say "built $name in $(($(date +%s) - start)) s"
}

# pkg_of prints the package a binary is built from.
pkg_of() {
	case "$1" in
	sample-device-plugin) echo k8s.io/kubernetes/test/images/sample-device-plugin ;;
	dra-test-driver) echo k8s.io/kubernetes/test/e2e/dra/test-driver ;;
	*) echo "k8s.io/kubernetes/cmd/$1" ;;
	esac
}

# built_version prints the k8s.io/kubernetes module version a binary was built from, or nothing.
built_version() {
	[ -x "$1" ] || return 0
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "k8s.io/kubernetes" { print $3 }'
}

todo=()
for t in "${targets[@]}"; do
	if [ "$(built_version "$KUBE_BIN_DIR/$t")" = "$KUBE_VERSION" ]; then
		say "$t $KUBE_VERSION is up to date"
	else
		todo+=("$t")
	fi
done

if [ ${#todo[@]} -gt 0 ]; then
	mkdir -p "$KUBE_BUILD_DIR" "$KUBE_BIN_DIR"
	cd "$KUBE_BUILD_DIR"

	modjson=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION") ||
		die "cannot download k8s.io/kubernetes@$KUBE_VERSION from the module proxy"
	upstream_mod=$(printf '%s\n' "$modjson" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	[ -f "$upstream_mod" ] || die "no go.mod for k8s.io/kubernetes@$KUBE_VERSION in the module cache"
	staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$upstream_mod")
	[ -n "$staging" ] || die "found no staging modules in $upstream_mod"

	# Every binary built here so far stays a tool of the module, so one go.sum serves them all.
	tools=("${todo[@]}")
	for t in kubectl kube-apiserver kube-scheduler kube-controller-manager kubelet sample-device-plugin dra-test-driver; do
		if [ -x "$KUBE_BIN_DIR/$t" ]; then tools+=("$t"); fi
	done
	mapfile -t tools < <(printf '%s\n' "${tools[@]}" | sort -u)

	{
		echo "module nodeagent.local/kube-build"
		echo
		echo "go 1.25.0"
		echo
		echo "godebug default=go1.25"
		echo
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		echo
		for t in "${tools[@]}"; do
			echo "tool $(pkg_of "$t")"
		done
		echo
		for m in $staging; do
			echo "replace $m => $m $STAGING_VERSION"
		done
	} >go.mod.new
	if ! cmp -s go.mod.new go.mod.in 2>/dev/null || [ ! -f go.sum ]; then
		cp go.mod.new go.mod
		say "resolving dependencies in $KUBE_BUILD_DIR (go mod tidy)"
		go mod tidy || die "go mod tidy failed in $KUBE_BUILD_DIR"
		cp go.mod.new go.mod.in
	fi
	rm -f go.mod.new

	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	ldflags="-s -w"
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean"
	done
	for t in "${todo[@]}"; do
		say "building $t $KUBE_VERSION (the first build takes several minutes)"
		start=$(date +%s)
		# The test device plugin and DRA driver run in busybox containers: static.
		cgo=${CGO_ENABLED:-}
		case "$t" in sample-device-plugin | dra-test-driver) cgo=0 ;; esac
		CGO_ENABLED=$cgo nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$KUBE_BIN_DIR/$t.tmp" "$(pkg_of "$t")" ||
			die "building $t failed"
		mv -f "$KUBE_BIN_DIR/$t.tmp" "$KUBE_BIN_DIR/$t"
		say "built $t in $(($(date +%s) - start)) s"
	done
fi

# csi-attacher runs in a busybox container: static.
if [ "$attacher" = 1 ]; then
	build_from_module csi-attacher github.com/kubernetes-csi/external-attacher/v4 "$ATTACHER_VERSION" CGO_ENABLED=0 -- \
		build -trimpath -ldflags "-s -w" ./cmd/csi-attacher
	targets+=(csi-attacher)
fi
# critest is a test binary: cri-tools builds it with go test -c.
if [ "$critest" = 1 ]; then
	build_from_module critest sigs.k8s.io/cri-tools "$CRITEST_VERSION" -- test -c ./cmd/critest
	targets+=(critest)
fi

for t in "${targets[@]}"; do
	echo "$KUBE_BIN_DIR/$t"
done
