// Package demo is the simulated flash sale of `invledger demo`: a private
// Redis and PostgreSQL, the projector, and thousands of buyers (some of whom
// retry or try twice) buying through the Go library, with live progress and
// a summary that proves nothing was oversold and the ledger caught up.
package demo
