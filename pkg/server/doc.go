// Package server is the kubelet's endpoint. On plain HTTP (127.0.0.1:10248) it serves /healthz; on HTTPS
// (port 10250) it serves /healthz, /containerLogs/{namespace}/{pod}/{container} (follow, tailLines,
// previous, timestamps, sinceSeconds, sinceTime, limitBytes) read from the CRI-format files under
// /var/log/pods, and /exec, /attach and /portForward (SPDY and WebSocket, as upstream's kubelet routes them),
// which the API server's pods/log, pods/exec, pods/attach and pods/portforward reach.
//
// Every HTTPS path but /healthz is authenticated and authorized as upstream's kubelet does it with webhook
// authentication and authorization: callers present a client certificate of the client CA, or a bearer token
// that the API server vouches for (TokenReview); then a SubjectAccessReview asks the API server whether the
// caller may <verb> nodes/<subresource> of this node (requestAttributes: nodes/proxy for logs, exec, attach,
// port-forward and pprof). Answers are cached as upstream caches them, in bounded caches. Unauthenticated
// callers get 401, unauthorized ones 403. The serving certificate is given, or self-signed into
// <root dir>/pki.
//
// The package reads logs and serves; it finds pods, containers and sandboxes through callbacks, and must not
// change pods, containers or their logs.
package server
