package redisinventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// SKULayout is where a SKU keeps its receipts and its buyers' counts
// (records.lua, docs/storage.md). Each SKU records its own in its hash's
// layout field, set when it is warmed or restored, and every script reads
// both, so a deployment changes the layout of new SKUs without touching
// the ones that live.
type SKULayout string

const (
	// LayoutOneHash keeps them in the SKU hash, as fields r:<request_id>
	// and u:<user> with their counts in fields receipts and buyers: a
	// purchase call reads a SKU with one HMGET and writes it with one HSET.
	// A process older than this layout cannot read such a SKU.
	LayoutOneHash SKULayout = "one-hash"
	// LayoutThreeHashes is the layout of 1.0: receipts in the SKU's
	// requests hash and counts in its buyers hash. An upgrade from 1.0
	// keeps it until every process runs a version that reads both
	// (docs/deploy.md).
	LayoutThreeHashes SKULayout = "three-hashes"

	// DefaultSKULayout is the layout of new SKUs unless configured.
	DefaultSKULayout = LayoutOneHash
)

// Validate reports a layout other than the two.
func (l SKULayout) Validate() error {
	if l != LayoutOneHash && l != LayoutThreeHashes {
		return fmt.Errorf("SKU layout %q: want %s or %s", string(l), LayoutOneHash, LayoutThreeHashes)
	}
	return nil
}

// field is the value of a SKU hash's layout field for l, which warm.lua and
// restore_begin.lua write: none for the 1.0 layout, which predates it.
func (l SKULayout) field() string {
	if l == LayoutThreeHashes {
		return ""
	}
	return string(LayoutOneHash)
}

// skuRecords is where one SKU keeps its records, as records_of
// (records.lua) says: the key and field prefix of its receipts and of its
// buyers' counts.
type skuRecords struct {
	receipts, receiptPrefix string
	counts, countPrefix     string
}

// recordsOf is records_of for sku, whose hash's layout field reads layout
// ("" when absent).
func (k Keyspace) recordsOf(sku, layout string) skuRecords {
	if layout == string(LayoutOneHash) {
		key := k.SKUKey(sku)
		return skuRecords{receipts: key, receiptPrefix: "r:", counts: key, countPrefix: "u:"}
	}
	return skuRecords{receipts: k.RequestsKey(sku), counts: k.BuyersKey(sku)}
}

// LayoutField reads the layout field of the SKU hash at skuKey as the
// scripts read it, "" when absent (the 1.0 layout); a SKU hash of the
// wrong type is Redis's WRONGTYPE error. With ReceiptAt and CountAt it
// tells tools and tests where one record of a SKU is.
func LayoutField(ctx context.Context, client redis.UniversalClient, skuKey string) (string, error) {
	layout, err := client.HGet(ctx, skuKey, "layout").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read the layout of %s: %w", skuKey, err)
	}
	return layout, nil
}

// readRecordsOf reads sku's layout field and returns where its records
// are.
func readRecordsOf(ctx context.Context, client redis.UniversalClient, keys Keyspace, sku string) (skuRecords, error) {
	layout, err := LayoutField(ctx, client, keys.SKUKey(sku))
	if err != nil {
		return skuRecords{}, err
	}
	return keys.recordsOf(sku, layout), nil
}

// ReceiptAt is the key and field of request id req's receipt in a SKU
// whose hash's layout field reads layout ("" when absent), for tools and
// tests that read or break one record.
func (k Keyspace) ReceiptAt(sku, layout, req string) (key, field string) {
	r := k.recordsOf(sku, layout)
	return r.receipts, r.receiptPrefix + req
}

// CountAt is the key and field of user's count of units held, as ReceiptAt.
func (k Keyspace) CountAt(sku, layout, user string) (key, field string) {
	r := k.recordsOf(sku, layout)
	return r.counts, r.countPrefix + user
}
