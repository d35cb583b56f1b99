// Package wire is the wire format of the invledger HTTP API: the JSON
// bodies of its requests and answers, and the headers both sides read. The
// server (adapters/internal/httpapi) decodes and encodes these types and the Go
// client (client) encodes and decodes the same ones, so
// the two cannot disagree on a key; and since it imports only the standard
// library, the client links nothing of the server.
//
// The types are plain structs: the server maps its application types into
// them field by field, so a renamed Go field elsewhere cannot change the
// API. In request bodies, pointers tell a missing field from a zero one.
package wire
