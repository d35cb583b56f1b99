package bench

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Deps is what Run needs from the application's wiring. Each field is
// called only by the targets that need it.
type Deps struct {
	// ErrorCode names a library error by the code the HTTP API answers
	// with ("sold_out", "already_purchased", ...); the bench classifies the
	// lib target's errors and the http target's answers with the same table.
	ErrorCode func(error) string
	// Servers reads the Redis and PostgreSQL named on the command line, for
	// --target lib and pg-direct.
	Servers func() (Servers, error)
	// StartStack starts a private, migrated redis-server and PostgreSQL
	// for --compare; stop shuts both down.
	StartStack func(ctx context.Context, opts StackOptions) (srv Servers, stop func(), err error)
}

// StackOptions shapes the private stack of --compare.
type StackOptions struct {
	Dir        string            // the servers' data
	Durability string            // strict or everysec: Redis's fsync policy
	PGSettings map[string]string // postgresql.conf settings on top of the defaults
}

// Servers is a Redis and a PostgreSQL to load, and how to wire the library
// over them.
type Servers struct {
	RedisURL    string   // redis-benchmark's and the raw checks' Redis (--compare only)
	RedisAddrs  []string // host:port of every Redis node, to refuse remote ones
	DatabaseURL string   // pg-direct's database
	// Open wires the library over these servers, with the SKU catalogue
	// loaded into Redis; Site.Close releases it.
	Open func(ctx context.Context) (*Site, error)
}

// Site is the wired application the lib, raw and http targets run on.
type Site struct {
	Library Library
	Keys    Keys
	// HookedLibrary wires a second library over the same servers whose
	// Redis client runs hook, so raw can capture the script call a purchase
	// sends; release closes its client.
	HookedLibrary func(hook redis.Hook) (lib Library, release func(), err error)
	// Project runs the projector in this process until ctx ends.
	Project func(ctx context.Context) error
	// Serve runs `invledger serve` (api and projector) on 127.0.0.1 with
	// tokens (INVLEDGER_TOKENS's format) until ctx ends, and sends its
	// listening address to ready.
	Serve func(ctx context.Context, tokens string, ready chan<- string) error
	Close func()
}

// Library is the in-process library, in the words the bench needs.
type Library interface {
	// PutOnSale creates sku with stock units, one per buyer, and warms it.
	PutOnSale(ctx context.Context, sku string, stock int64) error
	// Deduct buys one unit of sku for user under requestID.
	Deduct(ctx context.Context, sku, user, requestID string) (Receipt, error)
	// RedisStock is the stock Redis holds for sku.
	RedisStock(ctx context.Context, sku string) (int64, error)
	// WaitLedger polls until the ledger's balance and seq for sku equal
	// Redis's, or timeout passes, and says how long it waited.
	WaitLedger(ctx context.Context, sku string, timeout time.Duration) (caughtUp bool, waited time.Duration, err error)
	// Footprint measures what sku costs Redis.
	Footprint(ctx context.Context, sku string) (Footprint, error)
	// Retire closes sku, archives its buyers once the ledger has caught up
	// (within timeout) and retires it from Redis.
	Retire(ctx context.Context, sku string, timeout time.Duration) error
	// PurchaseBatches reports the purchase script calls so far and the
	// attempts they carried.
	PurchaseBatches() (calls, attempts float64, err error)
	// PurchaseCallsInFlight reads invledger_purchase_batches_in_flight,
	// summed over its series: the purchase script calls in flight now. ok
	// is false where the library does not export it.
	PurchaseCallsInFlight() (calls float64, ok bool, err error)
}

// Footprint is what a SKU costs Redis: MEMORY USAGE of its keys and of its
// partition's tombstone set, and the server's used_memory.
type Footprint struct {
	UsedMemory int64
	SKUHash    int64
	Buyers     int64
	Requests   int64
	Tombstones int64
}

// Receipt is what the bench reads of a purchase's receipt.
type Receipt struct {
	Seq     int64
	EventID string
	// Replayed is set when the request id had bought before: this answer
	// sold nothing.
	Replayed bool
}

// Keys names a SKU's Redis keys.
type Keys interface {
	SKUKey(sku string) string
	BuyersKey(sku string) string
	RequestsKey(sku string) string
	SKUStreamKey(sku string) string
}
