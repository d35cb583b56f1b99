package domain

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// HoldStatus is where a hold is in its life: held until it ends, exactly
// once, confirmed, cancelled or expired; a confirmed hold whose sale was
// released since reads as released.
type HoldStatus string

// The hold states.
const (
	// HoldHeld is a reservation whose units are out of available stock and
	// not yet sold.
	HoldHeld HoldStatus = "held"
	// HoldConfirmed is a hold that became a sale: a purchase like any
	// other, which release can give back by the reserve's request id.
	HoldConfirmed HoldStatus = "confirmed"
	// HoldCancelled is a hold whose units went back on sale at the buyer's request.
	HoldCancelled HoldStatus = "cancelled"
	// HoldExpired is a hold whose deadline passed before it was confirmed:
	// its units went back on sale.
	HoldExpired HoldStatus = "expired"
	// HoldReleased is a confirmed hold whose sale was released since (a
	// refund, or the undoing of an order that could not be confirmed
	// whole): its units went back on sale. Neither confirm nor cancel
	// applies to it any more.
	HoldReleased HoldStatus = "released"
)

// Final reports whether the hold has ended.
func (s HoldStatus) Final() bool { return s != HoldHeld }

// Refusals of a hold operation. A hold ends once; every later attempt to end
// it another way is refused with the state it ended in.
var (
	// ErrHoldNotFound means the SKU has no hold with that id. It matches
	// ErrNotFound.
	ErrHoldNotFound = fmt.Errorf("hold %w", ErrNotFound)
	// ErrHoldExpired means the hold's deadline has passed: it is expired,
	// in effect from the deadline on, even before the sweeper returns its
	// units.
	ErrHoldExpired = errors.New("hold expired")
	// ErrHoldConfirmed means the hold was already confirmed, so it cannot
	// be cancelled.
	ErrHoldConfirmed = errors.New("hold confirmed")
	// ErrHoldCancelled means the hold was already cancelled, so it cannot
	// be confirmed.
	ErrHoldCancelled = errors.New("hold cancelled")
	// ErrHoldReleased means the hold was confirmed and its sale released
	// since, so it can be neither confirmed again nor cancelled.
	ErrHoldReleased = errors.New("hold released: its sale was given back")
	// ErrInvalidTTL is a ttl_seconds outside 1..the configured maximum.
	ErrInvalidTTL = errors.New("must be a whole number of seconds from 1 to the maximum")
	// ErrInvalidHoldID is a hold id that is not a UUID.
	ErrInvalidHoldID = errors.New("must be a UUID")
)

// ErrHoldEnded returns the refusal for a hold that already ended in status.
func ErrHoldEnded(status HoldStatus) error {
	switch status {
	case HoldConfirmed:
		return ErrHoldConfirmed
	case HoldCancelled:
		return ErrHoldCancelled
	case HoldExpired:
		return ErrHoldExpired
	case HoldReleased:
		return ErrHoldReleased
	}
	return fmt.Errorf("%w: hold is %q", ErrConflict, status)
}

// Hold defaults.
const (
	DefaultHoldMaxTTL     = time.Hour
	DefaultHoldDefaultTTL = 15 * time.Minute
)

// HoldConfig bounds the holds a deployment accepts.
type HoldConfig struct {
	// MaxTTL is the longest ttl_seconds accepted. Default DefaultHoldMaxTTL.
	MaxTTL time.Duration
	// DefaultTTL is the ttl of a reserve that gives none. Default
	// DefaultHoldDefaultTTL, or MaxTTL when that is shorter.
	DefaultTTL time.Duration
}

// SetDefaults fills the unset fields.
func (c *HoldConfig) SetDefaults() {
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultHoldMaxTTL
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = min(DefaultHoldDefaultTTL, c.MaxTTL)
	}
}

// Validate reports every invalid setting at once: both ttls must be whole
// seconds, at least one, and the default at most the maximum.
func (c HoldConfig) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MaxTTL", c.MaxTTL}, {"DefaultTTL", c.DefaultTTL}} {
		if d.v < time.Second || d.v%time.Second != 0 {
			errs = append(errs, fmt.Errorf("holds: %s must be a whole number of seconds, at least 1s, got %s", d.name, d.v))
		}
	}
	if c.DefaultTTL > c.MaxTTL {
		errs = append(errs, fmt.Errorf("holds: DefaultTTL %s exceeds MaxTTL %s", c.DefaultTTL, c.MaxTTL))
	}
	return errors.Join(errs...)
}

// HoldTTL is how long a hold lasts: 1 second to the configured maximum.
type HoldTTL struct{ v time.Duration }

// NewHoldTTL validates ttl_seconds against c: nil means c.DefaultTTL; zero,
// a negative number or more than c.MaxTTL is a FieldError on ttl_seconds.
func (c HoldConfig) NewHoldTTL(seconds *int64) (HoldTTL, error) {
	if seconds == nil {
		return HoldTTL{v: c.DefaultTTL}, nil
	}
	if *seconds < 1 || *seconds > int64(c.MaxTTL/time.Second) {
		return HoldTTL{}, NewFieldError("ttl_seconds", fmt.Errorf("%w (%d), got %d", ErrInvalidTTL, int64(c.MaxTTL/time.Second), *seconds))
	}
	return HoldTTL{v: time.Duration(*seconds) * time.Second}, nil
}

// Duration returns the ttl.
func (t HoldTTL) Duration() time.Duration { return t.v }

// HoldID identifies a hold. It is a UUID derived from the SKU and the
// reserve's request id, so a retried reserve names the same hold.
type HoldID struct{ v string }

// holdNamespace is the UUID namespace of hold ids.
var holdNamespace = uuid.MustParse("6f1c1d3e-2b8a-4c53-9a57-5d1e0a7f4b21")

// HoldIDFor returns the id of the hold that reserve req of sku makes.
func HoldIDFor(sku SKUID, req RequestID) HoldID {
	return HoldID{v: holdIDFor(sku.String(), req.String())}
}

func holdIDFor(sku, req string) string {
	return uuid.NewSHA1(holdNamespace, []byte(sku+"\x00"+req)).String()
}

// NewHoldID validates s as a hold id, as a caller sends it back.
func NewHoldID(s string) (HoldID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return HoldID{}, NewFieldError("hold_id", ErrInvalidHoldID)
	}
	return HoldID{v: id.String()}, nil
}

// String returns the id in canonical lower-case form.
func (h HoldID) String() string { return h.v }

// Hold is one reservation as Redis keeps it: its units leave available
// stock at reserve, and come back at cancel or expiry, or stay sold at
// confirm. Seq and Remaining are the reserve's.
type Hold struct {
	HoldID    string
	SKU       string
	User      string
	Qty       int64
	Status    HoldStatus
	ExpiresAt time.Time
	Seq       int64
	Remaining int64
	RequestID string
	OrderID   string
	// EventID is the reserved event's id.
	EventID string
	// EndSeq and EndEventID are the event that ended the hold; zero while held.
	EndSeq     int64
	EndEventID string
	// Replayed is true when a retried reserve returned the original hold.
	Replayed bool
}
