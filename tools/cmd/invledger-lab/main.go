// Command invledger-lab is the invledger command line plus what a server
// never needs: `invledger-lab bench`, the flash-sale load generator behind
// make bench and BENCHMARKS.md. It lives in the tools module so that the
// shipped binary (cmd/invledger) links neither the load generator nor its
// report renderers.
package main

import (
	"os"

	"github.com/invledger/invledger/adapters/cli"
)

func main() { os.Exit(cli.Main(cli.NewRootCmd(newBenchCmd))) }
