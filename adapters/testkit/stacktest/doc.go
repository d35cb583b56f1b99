// Package stacktest assembles the whole purchase stack over private Redis and
// PostgreSQL servers, for integration tests of every layer. The stack is
// built by app.New; its adapters are typed by the ports the tests use them
// through, so a test outside adapters/ depends on no internal package.
package stacktest
