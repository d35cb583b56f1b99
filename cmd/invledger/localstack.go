package main

import (
	"github.com/invledger/invledger/app"
)

// appendFsync is the Redis appendfsync a durability mode needs.
func appendFsync(durability string) string {
	if durability == app.DurabilityEverysec {
		return "everysec"
	}
	return "always"
}
