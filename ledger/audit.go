package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// Paging bounds of the audit queries.
const (
	// DefaultAuditLimit is the page size when a query names none.
	DefaultAuditLimit = 100
	// MaxAuditLimit is the largest page, so one request cannot make the
	// server hold a whole hot SKU's ledger in memory.
	MaxAuditLimit = 1000
)

var (
	errAuditLimit = fmt.Errorf("must be an integer from 1 to %d", MaxAuditLimit)
	errAfterSeq   = errors.New("must be a seq: an integer of 0 or more")
	errCursor     = errors.New("must be the next_after value of the previous page")
	errInstant    = errors.New("must be an RFC3339 instant such as 2026-05-01T12:00:00Z, now, or a signed duration from now such as -5m")
)

// AuditEntry is one ledger row with every column of ledger_entries. Empty
// strings stand for the columns that are NULL in the row.
type AuditEntry struct {
	EventID      string
	SKU          string
	Seq          int64
	Type         domain.EventType
	Delta        int64
	Qty          int64
	BalanceAfter int64
	UserID       string
	RequestID    string
	Actor        string
	Reason       string
	OccurredAt   time.Time
	RecordedAt   time.Time
	StreamID     string
	// PrevHash and Hash are the row's link in its SKU's tamper-evident
	// chain, from its seal (empty until the sealer linked the row);
	// `audit verify` recomputes them.
	PrevHash string
	Hash     string
	// HoldID, OrderID and ExpiresAt are set on a hold's events (ExpiresAt
	// on its reserved event only), so a SKU's or a user's history lists
	// its holds and how each ended.
	HoldID    string
	OrderID   string
	ExpiresAt *time.Time
}

// Holding is how many units of a SKU one user holds.
type Holding struct {
	UserID string
	Qty    int64
}

// UserCursor is the position just after one row of a user's events, which
// are ordered by (occurred_at, event_id): keyset paging, so a deep page
// costs what the first one does. The zero cursor is the start.
type UserCursor struct {
	OccurredAt time.Time
	EventID    string
}

// IsZero reports whether c is the start.
func (c UserCursor) IsZero() bool { return c.EventID == "" }

// String encodes c as next_after: the row's occurred_at in Unix
// microseconds (the ledger's precision), "_", and its event id. Every
// character is URL-safe, so it goes into a query string unescaped.
func (c UserCursor) String() string {
	return strconv.FormatInt(c.OccurredAt.UnixMicro(), 10) + "_" + c.EventID
}

// minPostgresMicros is PostgreSQL's earliest timestamptz (4713-11-24 BC)
// in Unix microseconds; its latest lies beyond int64 microseconds.
const minPostgresMicros = -210_866_803_200_000_000

// ParseUserCursor decodes a next_after value of UserEvents. A malformed one
// is a *domain.FieldError naming "after".
func ParseUserCursor(s string) (UserCursor, error) {
	micros, id, ok := strings.Cut(s, "_")
	if !ok {
		return UserCursor{}, domain.NewFieldError("after", errCursor)
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil || us < minPostgresMicros {
		// Below PostgreSQL's first timestamp no row can be: such a cursor
		// was never a next_after, and would read as an empty page.
		return UserCursor{}, domain.NewFieldError("after", errCursor)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return UserCursor{}, domain.NewFieldError("after", errCursor)
	}
	return UserCursor{OccurredAt: time.UnixMicro(us).UTC(), EventID: u.String()}, nil
}

// ParseInstant parses an instant for BalanceAt: RFC3339, "now", or a
// duration with its sign, such as -5m or +1h, from now. A malformed one is
// a *domain.FieldError naming "at".
func ParseInstant(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if s != "" && (s[0] == '-' || s[0] == '+') {
		if d, err := time.ParseDuration(s); err == nil {
			return now.Add(d), nil
		}
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		if strings.Contains(s, " ") {
			// A "+hh:mm" offset put unescaped into a URL query arrives
			// with the plus decoded to a space.
			return time.Time{}, domain.NewFieldError("at", fmt.Errorf("%w; in a URL, write the + of an offset as %%2B", errInstant))
		}
		return time.Time{}, domain.NewFieldError("at", errInstant)
	}
	return at, nil
}

// AuditStore reads the ledger for the audit queries. It reads only
// ledger_entries, the truth, never Redis or the balances projection, so
// the answers hold after Redis lost data and after archive-buyers.
type AuditStore interface {
	// SKUEntries returns up to limit rows of sku whose seq is above after,
	// in seq order.
	SKUEntries(ctx context.Context, sku domain.SKUID, after int64, limit int) ([]AuditEntry, error)
	// Holders returns up to limit users whose deducted units of sku exceed
	// their released ones, with the difference, ordered by the bytes of
	// their ids, starting after the user id after ("" from the first).
	Holders(ctx context.Context, sku domain.SKUID, after string, limit int) ([]Holding, error)
	// StockAt returns the sum of the deltas of sku's rows that occurred at
	// or before at: 0 before the SKU was stocked.
	StockAt(ctx context.Context, sku domain.SKUID, at time.Time) (int64, error)
	// UserEntries returns up to limit rows of user after the cursor,
	// ordered by (occurred_at, event_id).
	UserEntries(ctx context.Context, user domain.UserID, after UserCursor, limit int) ([]AuditEntry, error)
}

// SKUDefinitions finds SKU definitions; SKUStore satisfies it.
type SKUDefinitions interface {
	Get(ctx context.Context, sku domain.SKUID) (domain.SKUDefinition, error)
}

// Auditor answers the audit queries from the ledger. Inputs are validated
// before anything is read: bad input is a *domain.FieldError naming the
// field (sku, user_id, after, limit or at), and a SKU that was never
// defined is domain.ErrNotFound rather than an empty answer, so a mistyped
// SKU is not mistaken for one without sales.
type Auditor struct {
	store AuditStore
	skus  SKUDefinitions
	ops   OperationLog
}

// NewAuditor wires an Auditor to its ports.
func NewAuditor(store AuditStore, skus SKUDefinitions, ops OperationLog) *Auditor {
	return &Auditor{store: store, skus: skus, ops: ops}
}

// HistoryQuery asks for a SKU's ledger rows with seq above After (0: from
// the first), at most Limit of them (0: DefaultAuditLimit).
type HistoryQuery struct {
	SKU   string
	After int64
	Limit int
}

// HistoryPage is one page of a SKU's ledger rows in seq order. NextAfter is
// the After of the next page, nil on the last one.
type HistoryPage struct {
	SKU       string
	Events    []AuditEntry
	NextAfter *int64
}

// History returns a page of the SKU's ledger rows in seq order.
func (a *Auditor) History(ctx context.Context, q HistoryQuery) (HistoryPage, error) {
	sku, err := domain.NewSKUID(q.SKU)
	if err != nil {
		return HistoryPage{}, err
	}
	if q.After < 0 {
		return HistoryPage{}, domain.NewFieldError("after", errAfterSeq)
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return HistoryPage{}, err
	}
	if err := a.defined(ctx, sku); err != nil {
		return HistoryPage{}, err
	}
	// One row more than asked tells whether another page follows.
	rows, err := a.store.SKUEntries(ctx, sku, q.After, limit+1)
	if err != nil {
		return HistoryPage{}, fmt.Errorf("history of %s: %w", sku, err)
	}
	page := HistoryPage{SKU: sku.String(), Events: nonNil(rows)}
	if len(rows) > limit {
		page.Events = rows[:limit]
		next := rows[limit-1].Seq
		page.NextAfter = &next
	}
	return page, nil
}

// BuyersQuery asks for the holders of a SKU ordered by user id, after the
// user id After (a previous page's next_after; empty: from the first), at
// most Limit of them (0: DefaultAuditLimit).
type BuyersQuery struct {
	SKU   string
	After string
	Limit int
}

// BuyersView is one page of who holds units of a SKU, ordered by the bytes
// of the user ids. NextAfter is the After of the next page, nil on the last.
type BuyersView struct {
	SKU       string
	Buyers    []Holding
	NextAfter *string
}

// Buyers returns a page of who holds units of the SKU now, after releases,
// with how many: the units that count against the per-user limit, sold
// (deducted, or reserved and confirmed) less released, plus those in open
// holds, as Redis's buyers hash counts them, where that is above zero. It folds the ledger, so it also answers once archive-buyers
// removed the buyers from Redis. An After that is not a valid user id is a
// *domain.FieldError naming "after".
func (a *Auditor) Buyers(ctx context.Context, q BuyersQuery) (BuyersView, error) {
	sku, err := domain.NewSKUID(q.SKU)
	if err != nil {
		return BuyersView{}, err
	}
	if q.After != "" {
		if _, err := domain.NewUserID(q.After); err != nil {
			return BuyersView{}, domain.NewFieldError("after", fmt.Errorf("%w: %w", errCursor, err))
		}
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return BuyersView{}, err
	}
	if err := a.defined(ctx, sku); err != nil {
		return BuyersView{}, err
	}
	holders, err := a.store.Holders(ctx, sku, q.After, limit+1)
	if err != nil {
		return BuyersView{}, fmt.Errorf("buyers of %s: %w", sku, err)
	}
	view := BuyersView{SKU: sku.String(), Buyers: nonNil(holders)}
	if len(holders) > limit {
		view.Buyers = holders[:limit]
		view.NextAfter = &holders[limit-1].UserID
	}
	return view, nil
}

// StockAt is a SKU's stock at an instant.
type StockAt struct {
	SKU   string
	At    time.Time
	Stock int64
}

// BalanceAt returns the SKU's stock at the instant at: the fold of every
// ledger row that occurred at or before it, 0 before the SKU was stocked.
// Stocked, deducted, released and adjusted rows all count by their signed
// delta. Any instant is valid, year 1 (Go's zero time) and year 0 included:
// both answer 0.
func (a *Auditor) BalanceAt(ctx context.Context, skuID string, at time.Time) (StockAt, error) {
	sku, err := domain.NewSKUID(skuID)
	if err != nil {
		return StockAt{}, err
	}
	if err := a.defined(ctx, sku); err != nil {
		return StockAt{}, err
	}
	stock, err := a.store.StockAt(ctx, sku, at)
	if err != nil {
		return StockAt{}, fmt.Errorf("stock of %s at %s: %w", sku, at.Format(time.RFC3339Nano), err)
	}
	return StockAt{SKU: sku.String(), At: at, Stock: stock}, nil
}

// UserQuery asks for one user's ledger rows across every SKU, after the
// cursor After (a previous page's next_after; empty: from the first), at
// most Limit of them (0: DefaultAuditLimit).
type UserQuery struct {
	User  string
	After string
	Limit int
}

// UserPage is one page of a user's purchases and releases, ordered by
// occurred_at. NextAfter is the After of the next page, nil on the last.
type UserPage struct {
	UserID    string
	Events    []AuditEntry
	NextAfter *string
}

// UserEvents returns a page of the user's purchases and releases across
// every SKU. An unknown user has none.
func (a *Auditor) UserEvents(ctx context.Context, q UserQuery) (UserPage, error) {
	user, err := domain.NewUserID(q.User)
	if err != nil {
		return UserPage{}, err
	}
	var after UserCursor
	if q.After != "" {
		if after, err = ParseUserCursor(q.After); err != nil {
			return UserPage{}, err
		}
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return UserPage{}, err
	}
	rows, err := a.store.UserEntries(ctx, user, after, limit+1)
	if err != nil {
		return UserPage{}, fmt.Errorf("events of user %q: %w", user, err)
	}
	page := UserPage{UserID: user.String(), Events: nonNil(rows)}
	if len(rows) > limit {
		page.Events = rows[:limit]
		last := rows[limit-1]
		next := UserCursor{OccurredAt: last.OccurredAt, EventID: last.EventID}.String()
		page.NextAfter = &next
	}
	return page, nil
}

func (a *Auditor) defined(ctx context.Context, sku domain.SKUID) error {
	if _, err := a.skus.Get(ctx, sku); err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("%w: sku %s was never defined; check the SKU id", domain.ErrNotFound, sku)
		}
		return err
	}
	return nil
}

// CheckAuditLimit validates a page size that a caller gave explicitly:
// 1 to MaxAuditLimit. The *domain.FieldError names field, so an adapter
// can name its own parameter or flag.
func CheckAuditLimit(field string, n int) error {
	if n < 1 || n > MaxAuditLimit {
		return domain.NewFieldError(field, errAuditLimit)
	}
	return nil
}

// auditLimit reads a query's Limit: 0 is the default.
func auditLimit(n int) (int, error) {
	if n == 0 {
		return DefaultAuditLimit, nil
	}
	return n, CheckAuditLimit("limit", n)
}

// nonNil makes an empty answer an empty slice, which the transports
// encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
