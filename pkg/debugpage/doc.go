// Package debugpage is the node's debug page (/debug/pods): the node's health, and for every pod its worker
// state, phase, conditions, back-offs, startup timeline, probes, and one sentence saying why it is not Ready.
//
// The sentence comes from a pure function (WhyNotReady) of what the kubelet knows of the pod. The page is one
// self-contained HTML document (no external asset; a strict Content-Security-Policy), readable without
// JavaScript, which it uses only to refresh itself from the same data as JSON (Accept: application/json).
// The package renders what it is given; it reads no runtime, API or clock of its own.
package debugpage
