// Package apiclient opens, for the CLI, the invledger HTTP API's Go client
// (client) from the --api and --token flags or their
// variables: the commands that must act as an authenticated principal
// (manual stock adjustments need a second person, which only the API's
// tokens can vouch for) go through it.
package apiclient
