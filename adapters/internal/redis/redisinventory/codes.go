package redisinventory

import (
	"fmt"
	"strings"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// replyCode is a script's answer: the first element of its reply, or the
// whole reply of a script that answers with an integer. A code means the
// same in every script that gives it, and each script's header lists the
// codes it gives by number; a refusal's error is defined once, by refusal.
type replyCode int64

const (
	codeDone       replyCode = 1 // done now
	codeDoneBefore replyCode = 2 // done by an earlier call: its outcome, nothing written

	codeSoldOut           replyCode = 0   // {0, stock}: fewer units left than asked
	codeNotWarmed         replyCode = -1  // the SKU is not in Redis
	codeLimitReached      replyCode = -2  // the buyer's units would pass the per-user limit
	codeOverLimit         replyCode = -3  // qty above the per-user limit: no buyer could ever take it
	codeRecovering        replyCode = -4  // the SKU is not verified under this node's run (node.lua)
	codeClosed            replyCode = -5  // the sale is closed
	codeConflict          replyCode = -6  // the request id was used by another user, quantity or purchase
	codeNoDeduction       replyCode = -7  // no deduction with that request id
	codeInsufficientStock replyCode = -8  // {-8, stock}: the change would take stock below zero
	codeNoHold            replyCode = -9  // no such hold
	codeHoldEnded         replyCode = -10 // the hold ended otherwise, or is past its deadline (its status says which)
	codeNotDue            replyCode = -11 // expire of a hold before its deadline
	codeHoldNotConfirmed  replyCode = -12 // release of a request id whose hold is not confirmed
	codeSeqMoved          replyCode = -13 // {-13[, seq]}: the seq moved since the caller checked, or a restore owns the SKU
	codeOpen              replyCode = -14 // the sale is not closed
	codeNotArchived       replyCode = -15 // the buyers are not archived to SQL
	codeRedisAhead        replyCode = -16 // {-16, seq}: Redis holds the SKU at a higher seq than the ledger
	codeFenceLost         replyCode = -17 // the restore fence no longer holds the restore's token
	codeRestoreShort      replyCode = -18 // {-18, buyers, requests}: the hashes do not hold what the restore wrote
	codeLive              replyCode = -19 // the SKU is in Redis, so it is not retired
	codeCorruptSKU        replyCode = -20 // {-20, key, message}: the SKU's state does not read (a key of the wrong type, a field that does not parse); nothing written
	codeCorruptRecord     replyCode = -21 // {-21, kind, message}: one attempt of a batch met a malformed record and wrote nothing
)

// subject is what a script call was about, for the text of its refusal.
type subject struct {
	sku    string
	req    domain.RequestID
	hold   domain.HoldID
	status domain.HoldStatus // of the hold, as its reply gives it
}

// refusal is the error of code in the script reply rp, which holds the
// figures some codes carry: the one mapping of the codes to errors, which
// every decoder uses, through outcome or once it has handled the codes
// that are outcomes to it (a compare-and-set's codeSeqMoved, entomb's
// codeLive). A code no script gives is ErrScript.
func refusal(rp *reply, code replyCode, s subject) error {
	switch code {
	case codeSoldOut:
		return domain.ErrSoldOut
	case codeNotWarmed:
		return domain.ErrNotWarmed
	case codeLimitReached:
		return domain.ErrAlreadyPurchased
	case codeOverLimit:
		return domain.NewFieldError("qty", domain.ErrQuantityOverLimit)
	case codeRecovering:
		return fmt.Errorf("%w: sku %s is being verified after a Redis restart", domain.ErrRecovering, s.sku)
	case codeClosed:
		return domain.ErrClosed
	case codeConflict:
		return fmt.Errorf("%w: request_id %q was used by another user, quantity or purchase", domain.ErrConflict, s.req.String())
	case codeNoDeduction:
		return fmt.Errorf("%w: no deduction with request_id %q", domain.ErrNotFound, s.req.String())
	case codeInsufficientStock:
		stock := rp.Int(1, "stock")
		if err := rp.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: stock is %d", domain.ErrInsufficientStock, stock)
	case codeNoHold:
		return fmt.Errorf("%w: sku %s has no hold %s", domain.ErrHoldNotFound, s.sku, s.hold)
	case codeHoldEnded:
		return fmt.Errorf("%w: hold %s of %s", domain.ErrHoldEnded(s.status), s.hold, s.sku)
	case codeNotDue:
		return errNotDue
	case codeHoldNotConfirmed:
		return fmt.Errorf("%w: request_id %q reserved a hold that is not confirmed: cancel the hold instead", domain.ErrConflict, s.req.String())
	case codeSeqMoved:
		return ledger.ErrSeqMoved
	case codeOpen:
		return ledger.ErrSKUOpen
	case codeNotArchived:
		return ledger.ErrNotArchived
	case codeRedisAhead:
		seq := rp.Int(1, "seq")
		if err := rp.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: Redis holds seq %d", ledger.ErrRedisAhead, seq)
	case codeFenceLost:
		return errFenceLost(s.sku)
	case codeRestoreShort:
		buyers, requests := rp.Int(1, "buyers"), rp.Int(2, "requests")
		if err := rp.Err(); err != nil {
			return err
		}
		return fmt.Errorf("sku %s: Redis holds %d buyers and %d requests, not what was written; the sku stays fenced: run the restore again",
			s.sku, buyers, requests)
	case codeCorruptSKU:
		key, msg := rp.String(1, "key"), rp.String(2, "message")
		if err := rp.Err(); err != nil {
			return err
		}
		return &corruptReplyError{kind: ledger.RecordSKU, key: key, problem: strings.TrimPrefix(msg, malformedSKUState),
			err: fmt.Errorf("%s: %w: the state of sku %s does not read, nothing written: %s: %s", rp.what, ErrScript, s.sku, key, msg)}
	case codeCorruptRecord:
		kind, msg := ledger.RecordKind(rp.String(1, "kind")), rp.String(2, "message")
		if err := rp.Err(); err != nil {
			return err
		}
		if kind != ledger.RecordReceipt && kind != ledger.RecordHold {
			return fmt.Errorf("%s: %w: a corrupt record of kind %q", rp.what, ErrScript, kind)
		}
		return &corruptReplyError{kind: kind,
			err: fmt.Errorf("%s: %w: the attempt met a malformed %s and wrote nothing: %s", rp.what, ErrScript, kind, msg)}
	}
	return fmt.Errorf("%s: %w: code %d", rp.what, ErrScript, code)
}

// outcome reads the code of a script reply that is done now or done
// before, and returns it, or the error of a refusal or of a malformed
// reply.
func (r *reply) outcome(s subject) (replyCode, error) {
	code := r.Code()
	if err := r.Err(); err != nil {
		return code, err
	}
	if code != codeDone && code != codeDoneBefore {
		return code, refusal(r, code, s)
	}
	return code, nil
}

// errNotDue is an expire that reached a hold before its deadline: the
// sweeper leaves it for a later pass.
var errNotDue = fmt.Errorf("hold not yet due: %w", domain.ErrConflict)

// errFenceLost is a restore whose fence another restore or a stamp took.
func errFenceLost(sku string) error {
	return fmt.Errorf("%w: the restore fence of sku %s was replaced while it was being written (a second restore, or a stamp); "+
		"run the restore again", domain.ErrConflict, sku)
}
