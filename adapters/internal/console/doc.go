// Package console is the operator's console that serve mounts at /console/:
// server-rendered html/template pages (Sales, a SKU live, Approvals,
// Reconciliation, Health) whose assets, including the pinned htmx and uPlot
// builds under assets/vendor, are embedded, so the binary needs nothing at
// run time.
//
// A user signs in by pasting a token, checked as the API checks it; gateway
// tokens may not sign in. The session travels in an HttpOnly, SameSite=Strict
// cookie (Secure under TLS), authenticated and encrypted with keys derived
// from Config.Key (gorilla/securecookie), so every serve process with the
// same key reads it; a SessionStore shared by those processes records
// sign-outs. The cookie is re-stamped on every page the user opens and
// refused once older than Config.IdleTimeout. Forms carry a per-session CSRF
// token and must come from the console's own origin.
//
// Every page asks the /v1 API in-process with the user's own token, so what
// a user may read or do is exactly what the API allows that token: the pages
// only decide which buttons to offer.
//
// The SKU page's live feed is Server-Sent Events from one fan-out reader per
// partition stream with a watched SKU (eventtail.Follow), shared by every
// watcher of every SKU of it, which never waits for a slow one. Feeds are
// capped in all, per session and per principal (FeedLimits).
package console
