// Command invledger runs and operates the invledger inventory ledger: the
// purchase API, the projector, and the tools around them. Its commands live
// in package adapters/cli.
package main

import (
	"os"

	"github.com/invledger/invledger/adapters/cli"
)

func main() { os.Exit(cli.Main(cli.NewRootCmd())) }
