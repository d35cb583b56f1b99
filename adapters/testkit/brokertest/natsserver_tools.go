//go:build tools

package brokertest

// The current nats-server stays in go.mod for currentNATSServer to build.
import _ "github.com/nats-io/nats-server/v2/server"
