package cli

import (
	"github.com/invledger/invledger/adapters/app"
)

// AppendFsync is the Redis appendfsync a durability mode needs.
func AppendFsync(durability string) string {
	if durability == app.DurabilityEverysec {
		return "everysec"
	}
	return "always"
}
