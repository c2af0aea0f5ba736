// Command bench measures the node agent and prints each figure on its own line as "name: value unit", beside
// a reference measured in the same run, since the machines it runs on are noisy.
//
//	go run ./hack/bench runtime [--rounds N] # built-in runtime vs containerd's CRI plugin: 30 pods serial and parallel
//	go run ./hack/bench apiserver [--kubeconfig F] # 1,000 pods created, watched, listed, patched, deleted
//	go run ./hack/bench cluster [--bin-dir bin] # nodecluster up 3 to Ready, cold and warm, and with kube-apiserver; idle memory
//	go run ./hack/bench logs [--duration 20s] [--pods 110] # log throughput through the log daemon vs containerd's CRI plugin; its memory per pod
//	go run ./hack/bench nodeready [--runs 5] [--pods 30] # kubelet start to node Ready, standalone and against kube-apiserver; idle API requests
//	go run ./hack/bench kubelet [--only PHASE] [--rounds 3] # the kubelet as a child: pod bursts, exits, deletion, its memory and CPU, beside the bare runtime
//	go run ./hack/bench upstream [--rounds 2] # upstream's kubelet on cmd/noderuntime vs on containerd's CRI plugin, create to Ready
//
// Each benchmark's flags are in its file (nodeready.go, kubelet.go, upstream.go...). The benchmarks that
// run pods need root and a host prepared by hack/setup.sh; upstream and the kube-apiserver references need
// hack/control-plane.sh and hack/kube-binaries.sh. docs/performance.md records the figures.
package main
