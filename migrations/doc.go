// Package migrations holds the embedded, zero-padded SQL migrations and
// applies them with goose. 00001_baseline.sql is the schema of release 1;
// every later change is a new migration on top of it, never an edit of one
// a release has shipped.
package migrations
