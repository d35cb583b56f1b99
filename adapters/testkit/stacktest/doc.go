// Package stacktest assembles the whole purchase stack over private Redis and
// PostgreSQL servers, for integration tests of every layer.
package stacktest
