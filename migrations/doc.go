// Package migrations holds the embedded, zero-padded SQL migrations and
// applies them with goose.
package migrations
