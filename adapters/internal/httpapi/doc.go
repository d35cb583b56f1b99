// Package httpapi is the HTTP adapter over the application: JSON in and
// out, bearer-token auth with four roles (gateway buys and releases,
// operator runs the stock, approver decides adjustments, auditor reads),
// and the mapping of domain error codes onto status codes. It holds no
// business rules of its own: it decodes and validates once into domain
// types, authorizes, calls the application through ports it declares, and
// encodes the answer by mapping the application's types field by field
// into the bodies of wire, which the Go client shares, so
// renaming a Go field never changes the API.
//
// Every route is in one table (routes in server.go), served by one handler
// built by NewHandler from one Config.
package httpapi
