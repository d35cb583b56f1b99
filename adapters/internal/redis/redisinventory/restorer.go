package redisinventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

const (
	// restoreChunkFields is how many hash fields one restore_chunk.lua call
	// writes: big enough that a million receipts take a thousand calls,
	// small enough that one call stays well under a millisecond and Lua's
	// unpack limit.
	restoreChunkFields = 1000
	// restoreChunksPerPipeline is how many chunk calls go out per round trip.
	restoreChunksPerPipeline = 16
	// restoreTokenPrefix marks a fence held by a restore.
	restoreTokenPrefix = "restoring:"
)

// RedisRestorer rewrites SKUs' Redis state from the ledger and recreates
// the partition streams after Redis lost its data.
type RedisRestorer struct {
	client redis.UniversalClient
	keys   Keyspace
}

var _ ledger.InventoryRestorer = (*RedisRestorer)(nil)

// NewRedisRestorer returns a restorer over client using keys' layout.
func NewRedisRestorer(client redis.UniversalClient, keys Keyspace) *RedisRestorer {
	return &RedisRestorer{client: client, keys: keys}
}

// EnsureStreams creates every partition stream and group on it where they
// are missing, as after Redis lost its data: the projector's reads fail
// until its group exists again. A new group starts at the stream's first
// entry, not at its end, so an event appended before the group was created
// (a warm right after the wipe) is still projected; projection is
// idempotent by event_id, so this never adds a ledger row twice.
func (r *RedisRestorer) EnsureStreams(ctx context.Context, group string) (err error) {
	defer translateInto(&err)
	for _, stream := range r.keys.StreamKeys() {
		err := r.client.XGroupCreateMkStream(ctx, stream, group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("create consumer group %s on %s: %w", group, stream, err)
		}
	}
	return nil
}

// Restore replaces a SKU's Redis state with img in three steps: a script
// fences the SKU (purchases get recovering) and empties it of its records,
// pipelined scripts rewrite them in chunks while the fence still holds
// this restore's token, and a last script checks that every field landed,
// sets the figures and stamps the SKU verified. The SKU comes back in the
// keyspace's layout (Keyspace.Layout), whichever it had. Redis holding the
// SKU at a higher seq than img is ledger.ErrRedisAhead, and nothing is
// written. A restore that fails midway leaves the SKU fenced, never half
// open; running it again completes it. A retired SKU comes back whole and
// leaves its partition's tombstone set.
func (r *RedisRestorer) Restore(ctx context.Context, img ledger.RedisImage) (err error) {
	defer translateInto(&err)
	st := img.State
	keys := r.keys.SKUKeys(st.SKU)
	layout := r.keys.Layout().field()
	records := r.keys.recordsOf(st.SKU, layout)
	// A one-hash SKU counts its receipts and buyers in its hash; each chunk
	// of them adds to its count what it wrote (restore_chunk.lua).
	receiptsCount, buyersCount := "", ""
	if layout != "" {
		receiptsCount, buyersCount = "receipts", "buyers"
	}
	token := restoreTokenPrefix + uuid.NewString()
	if err := restoreChunkScript.Load(ctx, r.client).Err(); err != nil {
		return fmt.Errorf("load restore script: %w", err)
	}

	v, err := restoreBeginScript.Run(ctx, r.client, keys, token, st.Seq, st.Stock, img.Limit, layout).Slice()
	if err != nil {
		return fmt.Errorf("fence %s for restore: %w", st.SKU, err)
	}
	if _, err := newReply("fence "+st.SKU+" for restore", v).outcome(subject{sku: st.SKU}); err != nil {
		return fmt.Errorf("fence %s for restore from the ledger's seq %d: %w", st.SKU, st.Seq, err)
	}

	w := chunkWriter{client: r.client, skuKey: keys[0], token: token, sku: st.SKU}
	buyers := 0
	if img.ArchivedAt.IsZero() {
		for user, qty := range st.Buyers {
			if err := w.add(ctx, records.counts, buyersCount, records.countPrefix+user, strconv.FormatInt(qty, 10)); err != nil {
				return err
			}
		}
		buyers = len(st.Buyers)
	}
	requests := len(st.Requests)
	for req, p := range st.Requests {
		if err := w.add(ctx, records.receipts, receiptsCount, records.receiptPrefix+req, ReceiptValue(p)); err != nil {
			return err
		}
	}
	// Every hold comes back with its record, so a retry or a repeated end
	// gets its original answer; the request id of a hold not confirmed
	// gets its marker back, and each open hold its expiry entry, which the
	// finish script writes. A hold whose deadline passed while Redis was
	// down expires at the next sweep. Records first, markers after: a
	// chunk writes one kind, so alternating them would cost a call each.
	var expiring []any
	for id, h := range st.Holds {
		if err := w.add(ctx, keys[0], "", "hold:"+id, HoldRecord(h)); err != nil {
			return err
		}
		if h.Status == domain.HoldHeld {
			expiring = append(expiring, h.ExpiresAt.UnixMilli(), st.SKU+" "+id)
		}
	}
	for _, h := range st.Holds {
		if marker, ok := holdMarker(h); ok {
			if err := w.add(ctx, records.receipts, receiptsCount, records.receiptPrefix+h.RequestID, marker); err != nil {
				return err
			}
			requests++
		}
	}
	if len(st.Holds) > 0 {
		if err := w.add(ctx, keys[0], "", "held", st.Held); err != nil {
			return err
		}
		if err := w.add(ctx, keys[0], "", "holds", st.OpenHolds()); err != nil {
			return err
		}
	}
	if err := w.flush(ctx); err != nil {
		return err
	}

	v, err = restoreFinishScript.Run(ctx, r.client, append(keys, r.keys.SKUTombstoneKey(st.SKU), r.keys.SKUExpiryKey(st.SKU)),
		append([]any{token, st.Stock, st.Seq, img.Limit, img.StockedEventID, micros(img.ClosedAt), micros(img.ArchivedAt), buyers,
			requests, st.SKU}, expiring...)...).Slice()
	if err != nil {
		return fmt.Errorf("finish restore of %s: %w", st.SKU, err)
	}
	if _, err := newReply("finish restore of "+st.SKU, v).outcome(subject{sku: st.SKU}); err != nil {
		return fmt.Errorf("finish restore of %s, %d buyers and %d requests written: %w", st.SKU, buyers, requests, err)
	}
	return nil
}

// Entomb puts a retired SKU back into its partition's tombstone set, as
// after Redis lost its data. A SKU that Redis holds is left alone, and
// present is true.
func (r *RedisRestorer) Entomb(ctx context.Context, sku domain.SKUID) (present bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	n, err := entombScript.Run(ctx, r.client, []string{r.keys.SKUKey(s), r.keys.SKUTombstoneKey(s)}, s).Int64()
	if err != nil {
		return false, fmt.Errorf("tombstone %s: %w", s, err)
	}
	switch code := replyCode(n); code {
	case codeDone, codeLive:
		return code == codeLive, nil
	default:
		return false, refusal(newReply("tombstone "+s, []any{n}), code, subject{sku: s})
	}
}

// ReceiptValue renders a deduction as receipt.lua writes it in the
// requests hash: seq:remaining:qty:event_id:user, prefixed with
// R<release_seq>:<release_event_id>: once released.
func ReceiptValue(p domain.Purchase) string {
	v := strconv.FormatInt(p.Seq, 10) + ":" + strconv.FormatInt(p.Remaining, 10) + ":" + strconv.FormatInt(p.Qty, 10) + ":" + p.EventID + ":" + p.User
	if p.Released {
		v = "R" + strconv.FormatInt(p.ReleaseSeq, 10) + ":" + p.ReleaseEventID + ":" + v
	}
	return v
}

// HoldRecord renders a hold as hold.lua writes it in the SKU hash: its
// values in hold.lua's order, separated by newlines.
func HoldRecord(h domain.Hold) string {
	return strings.Join([]string{string(h.Status), strconv.FormatInt(h.ExpiresAt.UnixMilli(), 10), strconv.FormatInt(h.Seq, 10),
		strconv.FormatInt(h.Remaining, 10), strconv.FormatInt(h.Qty, 10), h.EventID, strconv.FormatInt(h.EndSeq, 10), h.EndEventID,
		h.RequestID, h.OrderID, h.User}, "\n")
}

// ParseReceipt reads a receipt of the requests hash as receipt.lua does,
// in the format ReceiptValue writes. Any other value is ErrScript.
func ParseReceipt(raw string) (domain.Purchase, error) {
	var p domain.Purchase
	bad := func() (domain.Purchase, error) {
		return domain.Purchase{}, fmt.Errorf("receipt %q: %w: not seq:remaining:qty:event_id:user", raw, ErrScript)
	}
	rest := raw
	if after, ok := strings.CutPrefix(raw, "R"); ok {
		parts := strings.SplitN(after, ":", 3)
		if len(parts) != 3 {
			return bad()
		}
		n, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return bad()
		}
		p.Released, p.ReleaseSeq, p.ReleaseEventID, rest = true, n, parts[1], parts[2]
	}
	parts := strings.SplitN(rest, ":", 5)
	if len(parts) != 5 {
		return bad()
	}
	var nums [3]int64
	for i := range nums {
		n, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return bad()
		}
		nums[i] = n
	}
	p.Seq, p.Remaining, p.Qty, p.EventID, p.User = nums[0], nums[1], nums[2], parts[3], parts[4]
	return p, nil
}

// micros renders t as Redis TIME microseconds, the scripts' timestamp
// format, or "" for the zero time.
func micros(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// chunkWriter batches hash fields into restore_chunk.lua calls and the calls
// into pipelines, so a restore costs a round trip per 16,000 fields.
type chunkWriter struct {
	client redis.UniversalClient
	skuKey string
	token  string
	sku    string

	target string // the hash the pending chunk writes to
	count  string // the SKU hash's count its fields add to, or ""
	args   []any  // token, count, then field/value pairs
	pipe   redis.Pipeliner
	queued int
}

// add writes field of target, a record of the kind the SKU hash's field
// count counts ("" for a kind not counted): restore_chunk.lua.
func (w *chunkWriter) add(ctx context.Context, target, count, field string, value any) error {
	if target != w.target || count != w.count || len(w.args) >= 2+2*restoreChunkFields {
		if err := w.endChunk(ctx); err != nil {
			return err
		}
		w.target, w.count = target, count
	}
	if len(w.args) == 0 {
		w.args = append(make([]any, 0, 2+2*restoreChunkFields), w.token, w.count)
	}
	w.args = append(w.args, field, value)
	return nil
}

// endChunk queues the pending chunk, sending the pipeline when it is full.
func (w *chunkWriter) endChunk(ctx context.Context) error {
	if len(w.args) > 2 {
		if w.pipe == nil {
			w.pipe = w.client.Pipeline()
		}
		w.pipe.EvalSha(ctx, restoreChunkScript.Hash(), []string{w.skuKey, w.target}, w.args...)
		w.queued++
	}
	w.args = nil
	if w.queued >= restoreChunksPerPipeline {
		return w.send(ctx)
	}
	return nil
}

func (w *chunkWriter) flush(ctx context.Context) error {
	if err := w.endChunk(ctx); err != nil {
		return err
	}
	return w.send(ctx)
}

func (w *chunkWriter) send(ctx context.Context) error {
	if w.queued == 0 {
		return nil
	}
	cmds, err := w.pipe.Exec(ctx)
	w.queued = 0
	if err != nil {
		return fmt.Errorf("restore %s: write buyers and requests: %w", w.sku, err)
	}
	for _, c := range cmds {
		n, err := c.(*redis.Cmd).Int64()
		if err != nil {
			return fmt.Errorf("restore %s: write buyers and requests: %w", w.sku, err)
		}
		if code := replyCode(n); code != codeDone {
			return refusal(newReply("restore "+w.sku, []any{n}), code, subject{sku: w.sku})
		}
	}
	return nil
}
