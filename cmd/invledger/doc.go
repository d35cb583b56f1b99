// Command invledger runs and operates the invledger inventory ledger: the
// purchase API, the projector, and the tools around them.
package main
