// Package freeport picks loopback TCP ports for servers that tests and benchmarks start as separate processes
// (API servers, kubelets), which must be told their port before they bind it.
//
// A port taken by listening on :0 and closing comes from the kernel's ephemeral range, and any outgoing
// connection may be given it as its local port before the server binds it: the server then fails with
// "address already in use". The ports handed out here come from below that range instead, and are never the
// same twice in one process.
package freeport
