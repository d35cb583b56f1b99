package redisinventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

var (
	// chainSource defines chain_hash, shared by the scripts that append events.
	//go:embed chain.lua
	chainSource string
	// seqGuardSource defines guard_seq, shared by the compare-and-set scripts.
	//go:embed seqguard.lua
	seqGuardSource string
	//go:embed warm.lua
	warmSource string
	//go:embed deduct.lua
	deductSource string
	//go:embed release.lua
	releaseSource string
	//go:embed state.lua
	stateSource string
	//go:embed adjust.lua
	adjustSource string
	//go:embed stamp.lua
	stampSource string
	//go:embed fence.lua
	fenceSource string
	//go:embed correct.lua
	correctSource string

	// redis.Script runs EVALSHA and falls back to EVAL only on NOSCRIPT, so the
	// hot path sends the 40-byte digest, not the script body.
	warmScript    = redis.NewScript(chainSource + warmSource)
	deductScript  = redis.NewScript(chainSource + deductSource)
	releaseScript = redis.NewScript(chainSource + releaseSource)
	stateScript   = redis.NewScript(stateSource)
	adjustScript  = redis.NewScript(chainSource + adjustSource)
	stampScript   = redis.NewScript(seqGuardSource + stampSource)
	fenceScript   = redis.NewScript(seqGuardSource + fenceSource)
	correctScript = redis.NewScript(seqGuardSource + correctSource)
)

// ErrScript marks a Redis reply that the scripts never produce: a version
// mismatch between binary and Redis, or a bug. It is never a purchase outcome.
var ErrScript = errors.New("unexpected redis script reply")

// RedisInventory runs the inventory scripts. Its client must not be shared
// with Watermill, whose subscriber closes the client it was given.
type RedisInventory struct {
	client redis.UniversalClient
	keys   Keyspace
	runIDs *RunIDs
}

// NewRedisInventory returns an inventory over client using keys' layout.
// runIDs must be attached to client (RunIDs.Attach) so that purchases carry
// the run_id of the Redis they run on.
func NewRedisInventory(client redis.UniversalClient, keys Keyspace, runIDs *RunIDs) *RedisInventory {
	return &RedisInventory{client: client, keys: keys, runIDs: runIDs}
}

// RunIDs returns the tracker of the run_ids of the Redis nodes in use.
func (r *RedisInventory) RunIDs() *RunIDs { return r.runIDs }

// runID returns the run_id of the node that holds key, connecting first if
// no connection to it was made yet.
func (r *RedisInventory) runID(ctx context.Context, key string) (string, error) {
	node := r.client
	if cluster, ok := r.client.(*redis.ClusterClient); ok {
		master, err := cluster.MasterForKey(ctx, key)
		if err != nil {
			return "", fmt.Errorf("cluster node of %s: %w", key, err)
		}
		node = master
	}
	client, ok := node.(*redis.Client)
	if !ok {
		return "", fmt.Errorf("unsupported redis client %T", node)
	}
	addr := client.Options().Addr
	if id := r.runIDs.Get(addr); id != "" {
		return id, nil
	}
	if err := client.Ping(ctx).Err(); err != nil {
		return "", fmt.Errorf("connect to redis %s: %w", addr, err)
	}
	if id := r.runIDs.Get(addr); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("redis %s: no run_id seen; was the tracker attached to the client?", addr)
}

// Keyspace returns the key layout in use.
func (r *RedisInventory) Keyspace() Keyspace { return r.keys }

// Load preloads every script so the first purchases do not pay for EVAL.
func (r *RedisInventory) Load(ctx context.Context) error {
	for _, s := range []*redis.Script{warmScript, deductScript, releaseScript, stateScript, stampScript, fenceScript, correctScript, adjustScript} {
		if err := s.Load(ctx, r.client).Err(); err != nil {
			return fmt.Errorf("load redis scripts: %w", err)
		}
	}
	return nil
}

// Warm loads def into Redis with its stocked event, identified by eventID.
// stocked is false when the SKU was already live: then nothing changed and the
// returned state is the live one.
func (r *RedisInventory) Warm(ctx context.Context, def domain.SKUDefinition, eventID string) (state domain.StockState, stocked bool, err error) {
	sku := def.SKU().String()
	reply, err := warmScript.Run(ctx, r.client,
		[]string{r.keys.SKUKey(sku), r.keys.SKUStreamKey(sku)},
		sku, def.InitialStock(), def.PerUserLimit(), eventID,
	).Slice()
	if err != nil {
		return domain.StockState{}, false, fmt.Errorf("warm %s: %w", sku, err)
	}
	code, err := replyInt(reply, 0)
	if err != nil || len(reply) != 4 {
		return domain.StockState{}, false, fmt.Errorf("warm %s: %w: %v", sku, ErrScript, reply)
	}
	state = domain.StockState{SKU: sku, Limit: def.PerUserLimit()}
	state.Stock, _ = replyInt(reply, 1)
	state.Seq, _ = replyInt(reply, 2)
	status, _ := reply[3].(string)
	state.Status = domain.SKUStatus(status)
	return state, code == 1, nil
}

// Deduct runs one purchase attempt. A replay of an earlier request id returns
// that request's original receipt. Refusals are domain sentinel errors
// (ErrSoldOut, ErrAlreadyPurchased, ErrNotWarmed, ErrClosed, ErrConflict, or a
// qty FieldError) and write nothing.
func (r *RedisInventory) Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	s := sku.String()
	keys := []string{r.keys.SKUKey(s), r.keys.BuyersKey(s), r.keys.RequestsKey(s), r.keys.SKUStreamKey(s)}
	runID, err := r.runID(ctx, keys[0])
	if err != nil {
		return domain.Receipt{}, err
	}
	reply, err := deductScript.Run(ctx, r.client, keys, s, user.String(), qty.Int64(), req.String(), eventID, runID).Slice()
	if err != nil {
		return domain.Receipt{}, fmt.Errorf("deduct %s: %w", s, err)
	}
	code, err := replyInt(reply, 0)
	if err != nil {
		return domain.Receipt{}, fmt.Errorf("deduct %s: %w", s, err)
	}
	switch code {
	case 1, 2:
		if len(reply) != 4 {
			return domain.Receipt{}, fmt.Errorf("deduct %s: %w: %v", s, ErrScript, reply)
		}
		rc := domain.Receipt{SKU: s, Qty: qty.Int64(), User: user.String(), RequestID: req.String()}
		rc.EventID, _ = reply[1].(string)
		rc.Seq, _ = replyInt(reply, 2)
		rc.Remaining, _ = replyInt(reply, 3)
		return rc, nil
	case 0:
		return domain.Receipt{}, domain.ErrSoldOut
	case -1:
		return domain.Receipt{}, domain.ErrNotWarmed
	case -2:
		return domain.Receipt{}, domain.ErrAlreadyPurchased
	case -3:
		return domain.Receipt{}, domain.NewFieldError("qty", domain.ErrQuantityOverLimit)
	case -4:
		return domain.Receipt{}, fmt.Errorf("%w: sku %s is being verified after a Redis restart", domain.ErrRecovering, s)
	case -5:
		return domain.Receipt{}, domain.ErrClosed
	case -6:
		return domain.Receipt{}, fmt.Errorf("%w: request_id %q was used by another user or quantity", domain.ErrConflict, req.String())
	}
	return domain.Receipt{}, fmt.Errorf("deduct %s: %w: code %d", s, ErrScript, code)
}

// Release returns the units of the deduction made by req to stock, exactly
// once. Unknown deductions are ErrNotFound; a deduction of another user is ErrConflict.
func (r *RedisInventory) Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error) {
	s := sku.String()
	keys := []string{r.keys.SKUKey(s), r.keys.BuyersKey(s), r.keys.RequestsKey(s), r.keys.SKUStreamKey(s)}
	runID, err := r.runID(ctx, keys[0])
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	reply, err := releaseScript.Run(ctx, r.client, keys, s, user.String(), req.String(), eventID, reason.String(), runID).Slice()
	if err != nil {
		return domain.ReleaseReceipt{}, fmt.Errorf("release %s: %w", s, err)
	}
	code, err := replyInt(reply, 0)
	if err != nil {
		return domain.ReleaseReceipt{}, fmt.Errorf("release %s: %w", s, err)
	}
	switch code {
	case 1, 2:
		if len(reply) < 3 {
			return domain.ReleaseReceipt{}, fmt.Errorf("release %s: %w: %v", s, ErrScript, reply)
		}
		res := domain.ReleaseReceipt{SKU: s, RequestID: req.String(), AlreadyReleased: code == 2}
		res.EventID, _ = reply[1].(string)
		res.Seq, _ = replyInt(reply, 2)
		return res, nil
	case -1:
		return domain.ReleaseReceipt{}, domain.ErrNotWarmed
	case -4:
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: sku %s is being verified after a Redis restart", domain.ErrRecovering, s)
	case -6:
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: request_id %q belongs to another user", domain.ErrConflict, req.String())
	case -7:
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: no deduction with request_id %q", domain.ErrNotFound, req.String())
	}
	return domain.ReleaseReceipt{}, fmt.Errorf("release %s: %w: code %d", s, ErrScript, code)
}

// Adjust applies an approved adjustment to the SKU's stock and appends its
// adjusted event, once per adjustment id: a retry returns the original
// outcome. A change that would take stock below zero is
// domain.ErrInsufficientStock and writes nothing.
func (r *RedisInventory) Adjust(ctx context.Context, sku domain.SKUID, adjustmentID, delta int64, eventID, actor, reason string) (domain.Receipt, error) {
	s := sku.String()
	keys := []string{r.keys.SKUKey(s), r.keys.SKUStreamKey(s)}
	runID, err := r.runID(ctx, keys[0])
	if err != nil {
		return domain.Receipt{}, err
	}
	reply, err := adjustScript.Run(ctx, r.client, keys, s, delta, eventID, actor, reason, runID, adjustmentID).Slice()
	if err != nil {
		return domain.Receipt{}, fmt.Errorf("adjust %s: %w", s, err)
	}
	code, err := replyInt(reply, 0)
	if err != nil {
		return domain.Receipt{}, fmt.Errorf("adjust %s: %w", s, err)
	}
	switch code {
	case 1, 2:
		if len(reply) != 4 {
			return domain.Receipt{}, fmt.Errorf("adjust %s: %w: %v", s, ErrScript, reply)
		}
		rc := domain.Receipt{SKU: s, Qty: delta}
		rc.EventID, _ = reply[1].(string)
		rc.Seq, _ = replyInt(reply, 2)
		rc.Remaining, _ = replyInt(reply, 3)
		return rc, nil
	case -1:
		return domain.Receipt{}, domain.ErrNotWarmed
	case -4:
		return domain.Receipt{}, fmt.Errorf("%w: sku %s is being verified after a Redis restart", domain.ErrRecovering, s)
	case -8:
		stock, _ := replyInt(reply, 1)
		return domain.Receipt{}, fmt.Errorf("%w: stock is %d, delta %d", domain.ErrInsufficientStock, stock, delta)
	}
	return domain.Receipt{}, fmt.Errorf("adjust %s: %w: code %d", s, ErrScript, code)
}

// State reads a SKU's live inventory in one round trip. A SKU that is not in
// Redis is ErrNotWarmed.
func (r *RedisInventory) State(ctx context.Context, sku domain.SKUID) (domain.StockState, error) {
	s := sku.String()
	key := r.keys.SKUKey(s)
	runID, err := r.runID(ctx, key)
	if err != nil {
		return domain.StockState{}, err
	}
	reply, err := stateScript.Run(ctx, r.client, []string{key}, runID).Slice()
	if err != nil {
		return domain.StockState{}, fmt.Errorf("state %s: %w", s, err)
	}
	if len(reply) == 0 {
		return domain.StockState{}, domain.ErrNotWarmed
	}
	if len(reply) != 5 {
		return domain.StockState{}, fmt.Errorf("state %s: %w: %v", s, ErrScript, reply)
	}
	st := domain.StockState{SKU: s}
	verified, _ := replyInt(reply, 4)
	st.Verified = verified == 1
	st.Stock, _ = replyInt(reply, 0)
	st.Seq, _ = replyInt(reply, 1)
	st.Limit, _ = replyInt(reply, 2)
	status, _ := reply[3].(string)
	st.Status = domain.SKUStatus(status)
	return st, nil
}

// StampMany marks SKUs as verified under the current Redis run, each provided
// its seq is still seqs[i]; stamped[i] is false when a purchase moved it since
// the check. One pipeline for all: after a restart every SKU needs its
// stamp, and a round trip (and fsync) per SKU would keep sales closed for seconds.
func (r *RedisInventory) StampMany(ctx context.Context, skus []string, seqs []int64) (stamped []bool, err error) {
	if err := stampScript.Load(ctx, r.client).Err(); err != nil {
		return nil, fmt.Errorf("load stamp script: %w", err)
	}
	cmds := make([]*redis.Cmd, len(skus))
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = stampScript.EvalSha(ctx, p, []string{r.keys.SKUKey(sku)}, seqs[i])
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stamp %d skus: %w", len(skus), err)
	}
	stamped = make([]bool, len(skus))
	for i, c := range cmds {
		n, err := c.Int64()
		stamped[i] = err == nil && n == 1
	}
	return stamped, nil
}

// Fence takes the SKU out of sale (purchases get recovering) if its seq is
// still seq. fenced is false when a purchase moved the seq meanwhile.
func (r *RedisInventory) Fence(ctx context.Context, sku domain.SKUID, seq int64) (fenced bool, err error) {
	return r.casScript(ctx, fenceScript, "fence", sku, seq)
}

// Correct sets the SKU's stock and stamps it verified if its seq is still
// seq. corrected is false when a purchase moved the seq meanwhile.
func (r *RedisInventory) Correct(ctx context.Context, sku domain.SKUID, seq, stock int64) (corrected bool, err error) {
	return r.casScript(ctx, correctScript, "correct", sku, seq, stock)
}

func (r *RedisInventory) casScript(ctx context.Context, s *redis.Script, name string, sku domain.SKUID, seq int64, args ...any) (bool, error) {
	n, err := s.Run(ctx, r.client, []string{r.keys.SKUKey(sku.String())}, append([]any{seq}, args...)...).Int64()
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", name, sku, err)
	}
	if n == -1 {
		return false, domain.ErrNotWarmed
	}
	return n == 1, nil
}

func replyInt(reply []any, i int) (int64, error) {
	if i >= len(reply) {
		return 0, fmt.Errorf("%w: %d elements, want index %d", ErrScript, len(reply), i)
	}
	n, ok := reply[i].(int64)
	if !ok {
		return 0, fmt.Errorf("%w: element %d is %T", ErrScript, i, reply[i])
	}
	return n, nil
}
