// Package server is the kubelet's endpoint. On plain HTTP (127.0.0.1:10248) it serves /healthz; on HTTPS
// (port 10250) it serves /healthz, /containerLogs/{namespace}/{pod}/{container} (follow, tailLines,
// previous, timestamps, sinceSeconds, sinceTime, limitBytes) read from the CRI-format files under
// /var/log/pods, and /exec, /attach and /portForward (SPDY and WebSocket, as upstream's kubelet routes them),
// which the API server's pods/log, pods/exec, pods/attach and pods/portforward reach.
//
// HTTPS callers are authenticated by a client certificate the cluster CA signed; anonymous or unverifiable
// callers get 401, and nodes (group system:nodes) 403. There is no further authorization yet. The serving
// certificate is given, or self-signed into <root dir>/pki.
//
// The package reads logs and serves; it finds pods, containers and sandboxes through callbacks, and must not
// change pods, containers or their logs.
package server
