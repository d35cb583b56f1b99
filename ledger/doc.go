// Package ledger is the application layer of invledger: the purchase path
// (Service), holds and orders (Holds, Orders) and their expiry
// (HoldExpiry), recovery of Redis from the ledger (Recovery), the end of a
// sale, from close through archive to retirement from Redis (Archiver), manual adjustments with a second person's approval
// (Adjustments), audit queries (Auditor) and the tamper-evident chain check
// (VerifyChains). It speaks only domain types and reaches Redis and
// PostgreSQL through the ports it declares (ports.go, recovery_ports.go),
// which adapters/ implements.
//
// Go callers use it in-process, so a purchase costs one Redis round trip
// and no network hop of ours; the HTTP API and the CLI are thin adapters
// over it. app wires it.
package ledger
