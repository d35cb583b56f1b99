package redisinventory

import (
	"context"
	"fmt"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// holdAction is what hold_end.lua does to a held hold.
type holdAction string

const (
	actionConfirm holdAction = "confirm"
	actionCancel  holdAction = "cancel"
	actionExpire  holdAction = "expire"
)

// Reserve takes qty units of sku out of available stock for user until
// the hold is confirmed, cancelled or expires after ttl, by Redis's clock.
// It runs deduct's checks in deduct's order and refuses with the same
// errors; the per-user limit counts held and sold units together. A retry
// with the same request id returns the original hold, in its state now,
// with Replayed set. orderID may be empty.
func (r *RedisInventory) Reserve(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID,
	ttl domain.HoldTTL, orderID string, eventID string) (domain.Hold, error) {
	s := sku.String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.Hold{}, err
	}
	op := fmt.Sprintf("reserve %s request_id %q", s, req.String())
	holdID := domain.HoldIDFor(sku, req).String()
	v, err := r.batches.do(ctx, s, "r", user.String(), qty.Int64(), req.String(), eventID,
		ttl.Duration().Milliseconds(), holdID, orderID)
	if err != nil {
		return domain.Hold{}, r.corrupt(ctx, fmt.Errorf("%s: %w", op, err), ledger.CorruptRecord{SKU: s})
	}
	h, code, _, err := parseHold(op, s, holdID, v)
	if err != nil {
		return domain.Hold{}, err
	}
	if err := holdRefusal(op, v, subject{sku: s, req: req}); err != nil {
		return domain.Hold{}, r.corrupt(ctx, err, ledger.CorruptRecord{SKU: s, RequestID: req.String(), HoldID: holdID})
	}
	h.Replayed = code == codeDoneBefore
	return h, nil
}

// ConfirmHold makes the hold a sale, once: the units stay sold and the
// reserve's request id can be released like a deduction's. Repeating it
// returns the same hold. A hold that was cancelled, or is past its deadline,
// is refused with domain.ErrHoldCancelled or domain.ErrHoldExpired.
func (r *RedisInventory) ConfirmHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error) {
	h, _, err := r.endHold(ctx, sku, hold, actionConfirm, eventID)
	return h, err
}

// CancelHold gives the hold's units and the buyer's allowance back, once.
// Repeating it returns the same hold. A hold that was confirmed, or is past
// its deadline, is refused with domain.ErrHoldConfirmed or domain.ErrHoldExpired.
func (r *RedisInventory) CancelHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error) {
	h, _, err := r.endHold(ctx, sku, hold, actionCancel, eventID)
	return h, err
}

// endHold runs hold_end.lua with action. It also reports the Redis clock
// the script judged by.
func (r *RedisInventory) endHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, action holdAction, eventID string) (domain.Hold, time.Time, error) {
	s := sku.String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.Hold{}, time.Time{}, err
	}
	op := fmt.Sprintf("%s hold %s of %s", action, hold, s)
	keys := r.keys.HoldKeys(s)
	v, err := holdEndScript.Run(ctx, r.client, keys, s, string(action), hold.String(), eventID).Slice()
	if err != nil {
		return domain.Hold{}, time.Time{}, r.corrupt(ctx, r.failed(ctx, op, err), ledger.CorruptRecord{SKU: s, HoldID: hold.String()})
	}
	replies, err := holdEndReplies(op, v, 1)
	if err != nil {
		return domain.Hold{}, time.Time{}, err
	}
	h, _, now, err := parseHold(op, s, hold.String(), replies[0])
	if err != nil {
		return domain.Hold{}, time.Time{}, err
	}
	return h, now, r.corrupt(ctx, holdRefusal(op, replies[0], subject{sku: s, hold: hold, status: h.Status}),
		ledger.CorruptRecord{SKU: s, HoldID: hold.String()})
}

// Hold reads a hold's state by Redis's clock: a held hold past its
// deadline reads as expired, and a confirmed one whose sale was released
// as released.
func (r *RedisInventory) Hold(ctx context.Context, sku domain.SKUID, hold domain.HoldID) (domain.Hold, error) {
	s := sku.String()
	ctx, cancel, _ := r.begin(ctx, false)
	defer cancel()
	op := fmt.Sprintf("hold %s of %s", hold, s)
	v, err := holdShowScript.Run(ctx, r.client, []string{r.keys.SKUKey(s), r.keys.RequestsKey(s)}, hold.String()).Slice()
	if err != nil {
		return domain.Hold{}, r.corrupt(ctx, r.failed(ctx, op, err), ledger.CorruptRecord{SKU: s, HoldID: hold.String()})
	}
	h, _, _, err := parseHold(op, s, hold.String(), v)
	if err != nil {
		return domain.Hold{}, err
	}
	// A SKU whose layout hold_show.lua does not know is corrupt, to be
	// reported like one that a hold script meets.
	return h, r.corrupt(ctx, holdRefusal(op, v, subject{sku: s, hold: hold, status: h.Status}),
		ledger.CorruptRecord{SKU: s, HoldID: hold.String()})
}

// holdRefusal is the error of a hold script's answer v: nil when the hold
// is in the state asked for.
func holdRefusal(op string, v []any, s subject) error {
	_, err := newReply(op, v).outcome(s)
	return err
}

// holdEndReplies splits hold_end.lua's reply into its answers, one per
// hold it was given.
func holdEndReplies(op string, v []any, holds int) ([][]any, error) {
	if len(v) != holds {
		return nil, fmt.Errorf("%s: %w: %d answers for %d holds", op, ErrScript, len(v), holds)
	}
	replies := make([][]any, len(v))
	for i, a := range v {
		r, ok := a.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: %w: answer %d is %T", op, ErrScript, i, a)
		}
		replies[i] = r
	}
	return replies, nil
}

// parseHold decodes hold_reply (hold.lua), or a refusal, which has no hold:
// a code, and for some a figure or a message. It also returns the Redis clock the script read.
func parseHold(op, sku, holdID string, v []any) (domain.Hold, replyCode, time.Time, error) {
	rp := newReply(op, v)
	code := rp.Code()
	if err := rp.Err(); err != nil || len(v) == 1 || code == codeSoldOut || code == codeCorruptSKU || code == codeCorruptRecord {
		return domain.Hold{}, code, time.Time{}, err
	}
	h := domain.Hold{HoldID: holdID, SKU: sku}
	h.Status = domain.HoldStatus(rp.String(1, "status"))
	h.ExpiresAt = time.UnixMilli(rp.Int(2, "expires_ms")).UTC()
	h.Seq = rp.Int(3, "seq")
	h.Remaining = rp.Int(4, "remaining")
	h.Qty = rp.Int(5, "qty")
	h.EventID = rp.String(6, "event_id")
	h.EndSeq = rp.Int(7, "end_seq")
	h.EndEventID = rp.String(8, "end_event_id")
	h.RequestID = rp.String(9, "request_id")
	h.OrderID = rp.String(10, "order_id")
	h.User = rp.String(11, "user")
	now := time.UnixMilli(rp.Int(12, "now_ms")).UTC()
	if err := rp.Err(); err != nil {
		return domain.Hold{}, 0, time.Time{}, err
	}
	return h, code, now, nil
}
