// Package bench is the harness behind `invledger-lab bench`: a closed-loop
// flash-sale load generator, the targets it loads, and the reports it
// writes. BENCHMARKS.md describes the method and the figures.
//
// The harness knows the application only through the ports in ports.go
// (Deps, Servers, Site, Library), which tools/cmd/invledger-lab fills from its
// wiring; it classifies the library's errors with the one error-code
// function it is given (Deps.ErrorCode), never with a table of its own.
//
// Files, by concept:
//
//	run.go         Run: a single target or --compare, and the report's output
//	config.go      Config: the flags, their defaults and validation
//	load.go        the load generator: traffic mix, workers, the live line
//	outcome.go     how an attempt ended, and the error codes that say so
//	targets.go     the target interface and one target's run
//	lib.go         lib: the Go library in-process
//	http.go        http: a running serve, over client.go
//	client.go  the minimal HTTP/1.1 keep-alive client of the purchases
//	sqlfirst.go    pg-direct: the SQL-first baseline, in schema invledger_bench
//	raw.go         raw: the deduct script under redis-benchmark, and its parser
//	compare.go     --compare: the private stack, the targets back to back, goals
//	cpu.go         cores used, from getrusage and /proc
//	report.go      one target's report: counting, percentiles, printing
package bench
