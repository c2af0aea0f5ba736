// Package svcenv computes the service environment variables of a pod's containers, as upstream's kubelet
// does: for each Service with a cluster IP in the pod's namespace (when spec.enableServiceLinks, the
// default, is true) and, always, the kubernetes Service of the default namespace, the <NAME>_SERVICE_HOST,
// <NAME>_SERVICE_PORT[_<PORT NAME>] variables and the Docker link variables (<NAME>_PORT,
// <NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]).
//
// FromServices and ForPod are pure; Watcher keeps the cluster's Services in memory through a list and
// watch, as upstream's service informer does.
package svcenv
