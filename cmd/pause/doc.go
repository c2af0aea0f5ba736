// Command pause is the pod sandbox's init process: it holds the pod's
// namespaces open, reaps zombie children, and exits 0 on SIGINT or SIGTERM.
// It behaves like upstream's pause.c and is built static (CGO_ENABLED=0) so
// that it runs in an image that holds nothing else.
//
// It must stay tiny: no flags beyond -v, no logging beyond one line on exit,
// and no dependencies outside the standard library.
package main
