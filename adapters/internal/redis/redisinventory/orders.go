package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// PutOrder stores record as the order's record unless it has one, for keep,
// in one command (SET NX GET). It returns the record the order has now: the
// given one, or the one a first placing stored, which the caller compares.
func (r *RedisInventory) PutOrder(ctx context.Context, order domain.OrderID, record []byte, keep time.Duration) ([]byte, error) {
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return nil, err
	}
	old, err := r.client.SetArgs(ctx, r.keys.OrderKey(order.String()), record, redis.SetArgs{Mode: "NX", Get: true, TTL: keep}).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return record, nil
	case err != nil:
		return nil, r.failed(ctx, fmt.Sprintf("store order %q", order), err)
	}
	return old, nil
}

// Order returns the order's record, or domain.ErrNotFound.
func (r *RedisInventory) Order(ctx context.Context, order domain.OrderID) ([]byte, error) {
	ctx, cancel, err := r.begin(ctx, false)
	defer cancel()
	if err != nil {
		return nil, err
	}
	rec, err := r.client.Get(ctx, r.keys.OrderKey(order.String())).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, fmt.Errorf("order %q: %w", order, domain.ErrNotFound)
	case err != nil:
		return nil, r.failed(ctx, fmt.Sprintf("read order %q", order), err)
	}
	return rec, nil
}
