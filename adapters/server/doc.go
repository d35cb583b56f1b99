// Package server runs an application's long-running components in one
// process: the HTTP API, the projector and its stream janitor, the
// reconciler loop and the buyer archiver. It builds every component, and
// checks every setting, before starting any, and stops them all gracefully
// when its context ends.
package server
