// Package cli is the invledger command line: every command of the binary
// cmd/invledger builds, their flags and environment variables, and the exit
// statuses scripts rely on. It is a package rather than package main so that
// a second binary can carry the same commands plus its own: the bench of the
// tools module (tools/cmd/invledger-lab) is the one that does.
package cli
