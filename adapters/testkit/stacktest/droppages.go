package stacktest

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// DropPages is a go-redis hook on the drop_buyers.lua calls of one SKU,
// the only script called with its hash and its buyers hash alone
// (docs/storage.md: a one-hash SKU's buyers go a page at a time). It
// records how many buyers' counts each call carries, and fails the
// FailAt-th call that carries a page, counted from 1, as a connection
// lost midway would; 0 fails none.
type DropPages struct {
	SKUKey, BuyersKey string

	mu     sync.Mutex
	fields []int
	pages  int
	failAt int
}

// NewDropPages returns the hook for keys' SKU sku, failing its failAt-th
// page.
func NewDropPages(keys Keys, sku string, failAt int) *DropPages {
	return &DropPages{SKUKey: keys.SKUKey(sku), BuyersKey: keys.BuyersKey(sku), failAt: failAt}
}

// FailAt forgets the calls seen and fails the n-th page from now on.
func (d *DropPages) FailAt(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fields, d.pages, d.failAt = nil, 0, n
}

// Fields is the number of buyers' counts of each call seen, in order.
func (d *DropPages) Fields() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.fields...)
}

func (d *DropPages) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *DropPages) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d *DropPages) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && len(args) >= 6 && args[2] == 2 &&
			args[3] == d.SKUKey && args[4] == d.BuyersKey {
			d.mu.Lock()
			n := len(args) - 6 // evalsha, sha, 2, both keys, seq, then the page
			d.fields = append(d.fields, n)
			if n > 0 {
				d.pages++
			}
			fail := n > 0 && d.pages == d.failAt
			d.mu.Unlock()
			if fail {
				err := errors.New("connection lost")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}
