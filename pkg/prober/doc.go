// Package prober runs the liveness, readiness and startup probes of running containers, as upstream's
// kubelet does: one worker per probe of each running container, started when the sync loop first sees the
// container run and stopped when it no longer does, probing every periodSeconds after initialDelaySeconds,
// and changing its result only after successThreshold successes or failureThreshold failures in a row.
//
// The sync loop reads the results: a container is started once its startup probe succeeded (at once without
// one) and ready while its readiness probe succeeds (at once without one); a liveness or startup failure
// makes the sync kill the container and restart it by the pod's restart policy. A changed result asks for a
// sync of the pod.
//
// The handlers (exec through the runtime's ExecSync, httpGet, tcpSocket, grpc) reach the pod's IP, or the
// probe's host, only; their outcomes and messages are upstream's.
package prober
