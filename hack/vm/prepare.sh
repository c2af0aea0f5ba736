#!/usr/bin/env bash
# Builds the VM tests' guest root filesystems (hack/vm/test-cgroups.sh's and hack/vm/test-node.sh's) into the
# cache if they are not there, so that `make test` can do it in the background while the unit tests run
# (debootstrap mostly waits on the mirror and the disk). The tests wait for a build in progress.
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$VM_DIR/lib.sh"
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

vm_require_root
vm_host_packages
vm_say "guest root filesystem: $(vm_rootfs)"
VM_GUEST_PACKAGES="$VM_GUEST_PACKAGES,$VM_NODE_PACKAGES"
vm_say "node guest root filesystem: $(vm_rootfs)"
