// Package apiclient is the CLI's small client of the invledger HTTP API,
// for the commands that must act as an authenticated principal (manual
// stock adjustments need a second person, which only the API's tokens
// can vouch for).
package apiclient
