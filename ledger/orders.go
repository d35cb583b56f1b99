package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/invledger/invledger/domain"
)

// OrderInventory runs the hold scripts and keeps each order's record.
// *redisinventory.RedisInventory satisfies it.
type OrderInventory interface {
	HoldInventory
	Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error)
	PutOrder(ctx context.Context, order domain.OrderID, record []byte, keep time.Duration) ([]byte, error)
	Order(ctx context.Context, order domain.OrderID) ([]byte, error)
}

// orderRecordGrace is how long an order's record outlives its holds'
// deadline, so that confirm, cancel and show find the lines of an order
// ended by expiry, and a late retry of the placing is recognized.
const orderRecordGrace = 24 * time.Hour

// Orders reserves several SKUs for one buyer, all or none. An order is its
// lines' holds, one per SKU, each reserved by its own script call (each
// within one slot) and each carrying the order id, so the ledger alone
// tells what happened to an order. Its record, written once at placing,
// names the lines so that confirm, cancel and show can find them; the
// order's state is always derived from the holds.
type Orders struct {
	inv     OrderInventory
	history OrderHistory
	holds   *Holds
	cfg     domain.OrderConfig
	// afterLine, if set, is called after each line's reserve ("place") or
	// confirm ("confirm"), for tests that stop an operation halfway.
	afterLine func(op string, line int)
}

// OrderHistory finds an order's lines in the ledger, for an order whose
// record Redis lost. *pgstore.PostgresLedgerStore satisfies it.
type OrderHistory interface {
	// OrderReserves returns the reserved events of the order's lines,
	// earliest first.
	OrderReserves(ctx context.Context, order domain.OrderID) ([]domain.Event, error)
}

// NewOrders returns the order service over inv, with holds' ttl bounds and
// cfg's line limit (defaults applied). history, which may be nil, rebuilds
// the record of an order that Redis lost (a wipe, an eviction) from the
// ledger; without it such an order is not found.
func NewOrders(inv OrderInventory, history OrderHistory, holds *Holds, cfg domain.OrderConfig) (*Orders, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if holds == nil {
		return nil, errors.New("orders: the hold service is required, for its ttl bounds")
	}
	return &Orders{inv: inv, history: history, holds: holds, cfg: cfg}, nil
}

// SetAfterLine installs a hook called after each line of a placing is
// reserved (op "place") and after each line of a confirm is confirmed (op
// "confirm"), before the next; tests use it to stop an operation halfway.
func (o *Orders) SetAfterLine(f func(op string, line int)) { o.afterLine = f }

// Config returns the line limit in force.
func (o *Orders) Config() domain.OrderConfig { return o.cfg }

// OrderLineInput is one line of an order as a caller gives it.
type OrderLineInput struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// PlaceOrderCommand is a validated order.
type PlaceOrderCommand struct {
	OrderID domain.OrderID
	User    domain.UserID
	TTL     domain.HoldTTL
	Lines   []ReserveCommand
}

// orderRecord is what the order's record keeps: the order as placed.
type orderRecord struct {
	User       string           `json:"user_id"`
	TTLSeconds int64            `json:"ttl_seconds"`
	Lines      []OrderLineInput `json:"lines"`
}

// NewPlaceOrderCommand validates an order given as strings, in the order
// order_id, user_id, ttl_seconds, lines (count), then each line's sku and
// qty ("lines[i].sku"); a SKU named twice is refused on the later line. A
// nil ttl is the default one. Bad input is a *domain.FieldError.
func (o *Orders) NewPlaceOrderCommand(orderID, user string, ttlSeconds *int64, lines []OrderLineInput) (PlaceOrderCommand, error) {
	id, err := domain.NewOrderID(orderID)
	if err != nil {
		return PlaceOrderCommand{}, err
	}
	u, err := domain.NewUserID(user)
	if err != nil {
		return PlaceOrderCommand{}, err
	}
	ttl, err := o.holds.cfg.NewHoldTTL(ttlSeconds)
	if err != nil {
		return PlaceOrderCommand{}, err
	}
	if err := o.cfg.CheckLineCount(len(lines)); err != nil {
		return PlaceOrderCommand{}, err
	}
	cmd := PlaceOrderCommand{OrderID: id, User: u, TTL: ttl, Lines: make([]ReserveCommand, len(lines))}
	seen := make(map[string]bool, len(lines))
	for i, l := range lines {
		field := fmt.Sprintf("lines[%d].", i)
		sku, err := domain.NewSKUID(l.SKU)
		if err != nil {
			return PlaceOrderCommand{}, prefixField(field, err)
		}
		if seen[l.SKU] {
			return PlaceOrderCommand{}, domain.NewFieldError(field+"sku", fmt.Errorf("%w: %s", domain.ErrDuplicateSKU, l.SKU))
		}
		seen[l.SKU] = true
		qty, err := domain.NewQuantity(l.Qty)
		if err != nil {
			return PlaceOrderCommand{}, prefixField(field, err)
		}
		cmd.Lines[i] = ReserveCommand{SKU: sku, User: u, Qty: qty, RequestID: id.LineRequestID(sku), TTL: ttl}
	}
	return cmd, nil
}

// prefixField returns err, a *domain.FieldError, with its field under prefix.
func prefixField(prefix string, err error) error {
	var fe *domain.FieldError
	if errors.As(err, &fe) {
		return domain.NewFieldError(prefix+fe.Field, fe.Err)
	}
	return err
}

func (c PlaceOrderCommand) record() orderRecord {
	rec := orderRecord{User: c.User.String(), TTLSeconds: int64(c.TTL.Duration() / time.Second), Lines: make([]OrderLineInput, len(c.Lines))}
	for i, l := range c.Lines {
		rec.Lines[i] = OrderLineInput{SKU: l.SKU.String(), Qty: l.Qty.Int64()}
	}
	return rec
}

// conflict names the first member of rec, a retried order, that differs
// from the order first placed.
func (rec orderRecord) conflict(first orderRecord) error {
	field := ""
	switch {
	case rec.User != first.User:
		field = "user_id"
	case rec.TTLSeconds != first.TTLSeconds:
		field = "ttl_seconds"
	case len(rec.Lines) != len(first.Lines):
		field = "lines"
	default:
		for i := range rec.Lines {
			if rec.Lines[i] != first.Lines[i] {
				field = fmt.Sprintf("lines[%d]", i)
				break
			}
		}
	}
	if field == "" {
		return nil
	}
	return &domain.OrderError{Field: field, Err: fmt.Errorf("%w: the order id was placed with another %s", domain.ErrConflict, field)}
}

// Order is an order and its lines' holds, in line order; a line never
// reserved (a placing cut short) has a hold with only HoldID, SKU and Qty.
type Order struct {
	OrderID string
	User    string
	Status  domain.OrderStatus
	// ExpiresAt is the earliest deadline of the lines.
	ExpiresAt time.Time
	Lines     []domain.Hold
	// Replayed is true when a retried placing found every line reserved.
	Replayed bool
}

func newOrder(id domain.OrderID, user string, lines []domain.Hold) Order {
	o := Order{OrderID: id.String(), User: user, Lines: lines}
	states := make([]domain.HoldStatus, len(lines))
	for i, h := range lines {
		states[i] = h.Status
		if !h.ExpiresAt.IsZero() && (o.ExpiresAt.IsZero() || h.ExpiresAt.Before(o.ExpiresAt)) {
			o.ExpiresAt = h.ExpiresAt
		}
	}
	o.Status = domain.OrderStatusOf(states)
	return o
}

// Place reserves every line, in order, or none: if a line is refused, it
// cancels the lines it reserved and returns the refusal as a
// *domain.OrderError naming the line. A retry with the same order id and
// body reserves the same holds again, which replays them; a retry with
// another body is refused with domain.ErrConflict naming the member that
// differs. An order whose lines already ended cancelled or expired stays
// so: the retry is refused with that line's state. If the placing stops
// halfway (Redis unavailable, or the process dies), the reserved lines
// expire after the ttl unless a retry completes the order.
func (o *Orders) Place(ctx context.Context, cmd PlaceOrderCommand) (Order, error) {
	rec := cmd.record()
	data, err := json.Marshal(rec)
	if err != nil {
		return Order{}, fmt.Errorf("encode order %q: %w", cmd.OrderID, err)
	}
	stored, err := o.inv.PutOrder(ctx, cmd.OrderID, data, cmd.TTL.Duration()+orderRecordGrace)
	if err != nil {
		return Order{}, err
	}
	var first orderRecord
	if err := json.Unmarshal(stored, &first); err != nil {
		return Order{}, fmt.Errorf("decode order %q: %w", cmd.OrderID, err)
	}
	if err := rec.conflict(first); err != nil {
		return Order{}, err
	}
	lines := make([]domain.Hold, 0, len(cmd.Lines))
	replayed := true
	for i, l := range cmd.Lines {
		h, err := o.holds.reserve(ctx, l, cmd.OrderID.String())
		if err == nil && (h.Status == domain.HoldCancelled || h.Status == domain.HoldExpired) {
			err = domain.ErrHoldEnded(h.Status)
		}
		if err != nil {
			if domain.CodeOf(err) == domain.CodeUnavailable || domain.CodeOf(err) == domain.CodeInternal {
				// The outcome of this line is unknown: a retry completes
				// the order, or its lines expire.
				return Order{}, err
			}
			o.cancelHeld(ctx, lines)
			return Order{}, domain.LineError(i, l.SKU.String(), err)
		}
		replayed = replayed && h.Replayed
		lines = append(lines, h)
		if o.afterLine != nil {
			o.afterLine("place", i)
		}
	}
	out := newOrder(cmd.OrderID, cmd.User.String(), lines)
	out.Replayed = replayed
	return out, nil
}

// cancelHeld cancels the held holds among lines. A cancel that fails
// leaves that hold to expire, which gives its units back all the same.
func (o *Orders) cancelHeld(ctx context.Context, lines []domain.Hold) {
	for _, h := range lines {
		if h.Status != domain.HoldHeld {
			continue
		}
		_, _ = o.holds.Cancel(ctx, lineRef(h))
	}
}

// load returns the order's record and its lines' holds now.
func (o *Orders) load(ctx context.Context, id domain.OrderID) (orderRecord, []domain.Hold, error) {
	data, err := o.inv.Order(ctx, id)
	if errors.Is(err, domain.ErrNotFound) && o.history != nil {
		data, err = o.rebuild(ctx, id)
	}
	if err != nil {
		return orderRecord{}, nil, err
	}
	var rec orderRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return orderRecord{}, nil, fmt.Errorf("decode order %q: %w", id, err)
	}
	lines := make([]domain.Hold, len(rec.Lines))
	for i, l := range rec.Lines {
		sku, err := domain.NewSKUID(l.SKU)
		if err != nil {
			return orderRecord{}, nil, fmt.Errorf("order %q line %d: %w", id, i, err)
		}
		hid := domain.HoldIDFor(sku, id.LineRequestID(sku))
		h, err := o.holds.Hold(ctx, HoldRef{SKU: sku, Hold: hid})
		switch {
		case errors.Is(err, domain.ErrHoldNotFound):
			h = domain.Hold{HoldID: hid.String(), SKU: l.SKU, User: rec.User, Qty: l.Qty}
		case err != nil:
			return orderRecord{}, nil, err
		}
		lines[i] = h
	}
	return rec, lines, nil
}

// rebuild derives, from the ledger's reserved events, the record of an
// order Redis lost: the order's user, its ttl (deadline minus reserve
// time, both by the Redis clock) and its lines in the order they were
// reserved. It is not written back: the ledger may not have projected
// every line yet, and a record is written once. Lines a placing never
// reserved (it was refused or cut short there) are not in the ledger, so
// they are not in the rebuilt record either. An order whose record would
// have expired by now stays not found, as it would have without the loss.
func (o *Orders) rebuild(ctx context.Context, id domain.OrderID) ([]byte, error) {
	reserves, err := o.history.OrderReserves(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("order %q from the ledger: %w", id, err)
	}
	if len(reserves) == 0 {
		return nil, fmt.Errorf("order %q: %w", id, domain.ErrNotFound)
	}
	first := reserves[0]
	rec := orderRecord{User: first.User, TTLSeconds: int64(first.ExpiresAt.Sub(first.OccurredAt).Round(time.Second) / time.Second)}
	deadline := first.ExpiresAt
	for _, e := range reserves {
		rec.Lines = append(rec.Lines, OrderLineInput{SKU: e.SKU, Qty: e.Qty})
		if e.ExpiresAt.After(deadline) {
			deadline = e.ExpiresAt
		}
	}
	if time.Until(deadline)+orderRecordGrace <= 0 {
		return nil, fmt.Errorf("order %q: %w", id, domain.ErrNotFound)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode order %q: %w", id, err)
	}
	return data, nil
}

// lineRef names the hold of line h, an order line read back from Redis or
// the ledger, whose ids are valid.
func lineRef(h domain.Hold) HoldRef {
	sku, _ := domain.NewSKUID(h.SKU)
	id, _ := domain.NewHoldID(h.HoldID)
	return HoldRef{SKU: sku, Hold: id}
}

// Order returns the order's state, derived from its lines' holds; an
// unknown order id is domain.ErrNotFound.
func (o *Orders) Order(ctx context.Context, id domain.OrderID) (Order, error) {
	rec, lines, err := o.load(ctx, id)
	if err != nil {
		return Order{}, err
	}
	return newOrder(id, rec.User, lines), nil
}

// Confirm confirms every line still held, in order; repeating it gives the
// same answer, which is the order as Order shows it (newOrder, over the
// lines' holds). If a line cannot be confirmed (it expired, was cancelled,
// or was never reserved), the confirm fails with that line's refusal and
// every other line is undone: held lines are cancelled and lines this or
// an earlier confirm made final are released, so the order never ends
// half sold. A line whose sale was released after it was confirmed (a
// refund) stays released, and the others stand.
func (o *Orders) Confirm(ctx context.Context, id domain.OrderID) (Order, error) {
	rec, lines, err := o.load(ctx, id)
	if err != nil {
		return Order{}, err
	}
	// A line already ended fails the confirm before any line is confirmed;
	// a line that expires during the confirm is undone by release.
	for i, h := range lines {
		if cause := endedCause(h); cause != nil {
			return Order{}, o.undo(ctx, id, rec, lines, i, cause)
		}
	}
	for i, h := range lines {
		if h.Status != domain.HoldHeld {
			continue // confirmed before, or released since
		}
		c, err := o.holds.Confirm(ctx, lineRef(h))
		if err != nil {
			if code := domain.CodeOf(err); code == domain.CodeUnavailable || code == domain.CodeInternal {
				return Order{}, err
			}
			return Order{}, o.undo(ctx, id, rec, lines, i, err)
		}
		lines[i] = c
		if o.afterLine != nil {
			o.afterLine("confirm", i)
		}
	}
	return newOrder(id, rec.User, lines), nil
}

// undo cancels the held lines and releases the confirmed ones of an order
// whose line `failed` could not be confirmed, and returns that line's refusal.
func (o *Orders) undo(ctx context.Context, id domain.OrderID, rec orderRecord, lines []domain.Hold, failed int, cause error) error {
	refusal := domain.LineError(failed, lines[failed].SKU, cause)
	if _, err := o.unwind(ctx, id, rec, lines, failed, cause); err != nil {
		return errors.Join(refusal, err)
	}
	return refusal
}

// unwind cancels the held lines and releases the confirmed ones, naming
// line `failed` and its cause in each release's reason. It returns how
// many lines it released now; a line released before is not counted.
func (o *Orders) unwind(ctx context.Context, id domain.OrderID, rec orderRecord, lines []domain.Hold, failed int, cause error) (released int, err error) {
	o.cancelHeld(ctx, lines)
	user, err := domain.NewUserID(rec.User)
	if err != nil {
		return 0, err
	}
	reason, _ := domain.NewReason(fmt.Sprintf("order %s not confirmed: line %d %s", id, failed, domain.CodeOf(cause)))
	for _, h := range lines {
		if h.Status != domain.HoldConfirmed {
			continue
		}
		sku, _ := domain.NewSKUID(h.SKU)
		rc, err := o.inv.Release(ctx, sku, user, id.LineRequestID(sku), reason, newEventID())
		if err != nil {
			return released, fmt.Errorf("release line of sku %s: %w", h.SKU, err)
		}
		if !rc.AlreadyReleased {
			released++
		}
	}
	return released, nil
}

// Settle undoes an order that can no longer be confirmed whole, as a
// failed confirm does: if a line was confirmed while another ended
// cancelled or expired (or was never reserved), which a confirm cut short
// leaves behind, or a line confirmed on its own through the hold routes, it
// releases the confirmed lines and cancels the
// held ones. It returns how many lines it released now: 0 for an order
// with nothing to undo, or one undone before. HoldExpiry calls it for
// the order of each line it expires.
func (o *Orders) Settle(ctx context.Context, id domain.OrderID) (released int, err error) {
	rec, lines, err := o.load(ctx, id)
	if err != nil {
		return 0, err
	}
	failed, confirmed := -1, false
	var cause error
	for i, h := range lines {
		confirmed = confirmed || h.Status == domain.HoldConfirmed
		if c := endedCause(h); c != nil && failed < 0 {
			failed, cause = i, c
		}
	}
	if failed < 0 || !confirmed {
		return 0, nil
	}
	return o.unwind(ctx, id, rec, lines, failed, cause)
}

// endedCause is why line h can no longer be confirmed: it was never
// reserved, or it ended cancelled or expired. It is nil for a line held or
// confirmed.
func endedCause(h domain.Hold) error {
	switch h.Status {
	case "":
		return domain.ErrHoldNotFound
	case domain.HoldCancelled, domain.HoldExpired:
		return domain.ErrHoldEnded(h.Status)
	}
	return nil
}

// Cancel cancels every line still held; lines already cancelled or expired
// stay so, and repeating it gives the same answer. An order with a
// confirmed line whose sale stands is refused with that line's
// domain.ErrHoldConfirmed and nothing changes.
func (o *Orders) Cancel(ctx context.Context, id domain.OrderID) (Order, error) {
	rec, lines, err := o.load(ctx, id)
	if err != nil {
		return Order{}, err
	}
	for i, h := range lines {
		if h.Status == domain.HoldConfirmed {
			return Order{}, domain.LineError(i, h.SKU, domain.ErrHoldConfirmed)
		}
	}
	for i, h := range lines {
		if h.Status != domain.HoldHeld {
			continue
		}
		c, err := o.holds.Cancel(ctx, lineRef(h))
		switch {
		case errors.Is(err, domain.ErrHoldExpired):
			c, err = o.holds.Hold(ctx, lineRef(h))
		case errors.Is(err, domain.ErrHoldConfirmed):
			return Order{}, domain.LineError(i, h.SKU, err)
		}
		if err != nil {
			return Order{}, err
		}
		lines[i] = c
	}
	return newOrder(id, rec.User, lines), nil
}
