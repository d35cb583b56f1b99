package bench

// outcome is how one purchase attempt ended, as the bench counts it.
type outcome uint8

const (
	outOK         outcome = iota // success; sold or replayed is decided afterwards by seq
	outSold                      // success that deducted (targets that know it themselves)
	outReplayed                  // a retry answered with the original receipt
	outSoldOut                   // contract refusal: sold_out
	outAlready                   // contract refusal: already_purchased
	outNotWarmed                 // contract refusal the bench should never see
	outRecovering                // 503 recovering
	outClosed                    // contract refusal the bench should never see
	outConflict                  // request id reused with another user: a bench bug
	outInvalid                   // 400: a bench bug
	outTimeout                   // no answer within --timeout
	outError                     // anything else: 5xx, connection errors, SQL errors
	outUnfinished                // still in flight when the drain time ran out
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "sold", "replayed", "sold_out", "already_purchased", "not_warmed",
	"recovering", "closed", "conflict", "invalid_request", "timeout", "error", "unfinished"}

func (o outcome) String() string { return outcomeNames[o] }

// unexpected reports outcomes that a correct target never gives the bench's
// traffic: contract refusals that mean something is wrong, and errors.
func (o outcome) unexpected() bool { return o >= outNotWarmed && o != outUnfinished }

func (o outcome) success() bool { return o <= outReplayed }

// codeOutcome counts an error code, the library's or the HTTP API's: a
// refusal by its own name (the outcomes from outSoldOut to outInvalid are
// named as the codes are), anything else as an error.
func codeOutcome(code string) outcome {
	for o := outSoldOut; o <= outInvalid; o++ {
		if outcomeNames[o] == code {
			return o
		}
	}
	return outError
}
