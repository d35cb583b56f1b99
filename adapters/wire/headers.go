package wire

// Headers of the API, in their canonical forms, so the server can set them
// without allocating.
const (
	// HeaderRequestID carries a request's id: the caller's when it sends a
	// valid one, else one the server makes. Every answer carries it, every
	// error body repeats it as trace_id, and every log line of the request
	// has it as http_request_id. It is not the purchase's request_id, which
	// is an idempotency key.
	HeaderRequestID = "X-Request-Id"
	// HeaderIdempotencyKey is the standard header a client sends so that a
	// retried write is done once. It has two uses, one per kind of write: on
	// a purchase it is another name for the request_id; on the
	// writes that have no natural key (SKU create, adjustment request,
	// reconcile) the first answer is stored per principal and key, and a
	// retry gets it again, with HeaderReplayed.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is "true" on the answer of a retry that did nothing
	// again: a purchase's request id seen before, or a stored answer.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderReleased is "true" on a replayed purchase whose units were
	// released since; the body stays the original receipt.
	HeaderReleased = "Invledger-Released"
)

// ValidIdempotencyKey reports whether key can be an Idempotency-Key: 1-128
// visible ASCII characters, with spaces inside but at neither end (HTTP
// drops those), as the IETF draft's Structured Field string is. A purchase's
// request_id that is not one goes in the body alone.
func ValidIdempotencyKey(key string) bool {
	if key == "" || len(key) > 128 || key[0] == ' ' || key[len(key)-1] == ' ' {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}
