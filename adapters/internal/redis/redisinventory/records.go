package redisinventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// CorruptRecordReporter hears of every receipt or hold record that a call
// of the purchase path met and could not read, so that it is rebuilt from
// the ledger (ledger.Recovery.RepairRecord). It runs on the purchase path
// and must not block.
type CorruptRecordReporter interface {
	ReportCorrupt(ctx context.Context, rec ledger.CorruptRecord)
}

// corruptRecordText matches the error that read_receipt (receipt.lua) and
// read_hold (hold.lua) raise for a record that does not parse, and the one
// that state.lua raises for a SKU state that does not read (skustate.lua),
// as Redis reports it as the error of the scripts: batch.lua and the
// scripts that check the SKU with live_sku answer such an attempt with
// their own code (corruptReplyError). Its position prefix comes before
// the raw value, so a value that holds the same words cannot be taken for
// another kind.
var corruptRecordText = regexp.MustCompile(`user_script:\d+: malformed (receipt|hold record|sku state)(?:: )?(.*)`)

// malformedSKUState starts the message of a SKU state that does not read.
const malformedSKUState = "malformed sku state: "

// corruptReplyError is a script's answer to an attempt that met a corrupt
// record (codeCorruptRecord) or SKU state (codeCorruptSKU).
type corruptReplyError struct {
	kind ledger.RecordKind
	// key and problem say where and what, for a corrupt SKU state.
	key, problem string
	err          error
}

func (e *corruptReplyError) Error() string { return e.err.Error() }
func (e *corruptReplyError) Unwrap() error { return e.err }

// corruptKind tells whether err is a script's refusal to read a corrupt
// record or SKU state, and of which kind.
func corruptKind(err error) (ledger.RecordKind, bool) {
	c, ok := corruptOf(err)
	return c.kind, ok
}

// corruptOf reads err as corruptKind does, with the key and the problem
// that it names.
func corruptOf(err error) (corruptReplyError, bool) {
	if c, ok := errors.AsType[*corruptReplyError](err); ok {
		return *c, true
	}
	m := corruptRecordText.FindStringSubmatch(err.Error())
	switch {
	case m == nil:
		return corruptReplyError{}, false
	case m[1] == "receipt":
		return corruptReplyError{kind: ledger.RecordReceipt}, true
	case m[1] == "sku state":
		return corruptReplyError{kind: ledger.RecordSKU, problem: m[2]}, true
	}
	return corruptReplyError{kind: ledger.RecordHold}, true
}

// isCorrupt tells whether err is a script's refusal to read a corrupt
// record or SKU state, or a key of another type.
func isCorrupt(err error) bool {
	_, ok := corruptOf(err)
	return ok || redis.HasErrorPrefix(err, "WRONGTYPE")
}

// corrupt turns err, the error of a call about rec's SKU, request id and
// hold id, into a *ledger.CorruptRecordError when a script met a corrupt
// record, a SKU state that does not read, or a key of the wrong type
// (asCorrupt), which it reports; any other error, and nil, pass through.
func (r *RedisInventory) corrupt(ctx context.Context, err error, rec ledger.CorruptRecord) error {
	if err == nil {
		return nil
	}
	ce, ok := asCorrupt(ctx, r.client, r.keys, err, rec)
	if !ok {
		return err
	}
	if r.cfg.Corrupt != nil {
		r.cfg.Corrupt.ReportCorrupt(ctx, ce.Record)
	}
	return ce
}

// asCorrupt reads err, the error of a call about rec's SKU, request id and
// hold id, as corrupt when a script met a corrupt record, a SKU state that
// does not read, or a key of the wrong type, whose key it then asks Redis
// for (a script that raised WRONGTYPE does not say which).
func asCorrupt(ctx context.Context, client redis.UniversalClient, keys Keyspace, err error, rec ledger.CorruptRecord) (*ledger.CorruptRecordError, bool) {
	c, ok := corruptOf(err)
	if !ok {
		if !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return nil, false
		}
		found, diagErr := wrongTypeKey(ctx, client, keys, rec.SKU)
		if diagErr != nil || found.Kind == "" {
			return nil, false
		}
		rec, c = found, corruptReplyError{kind: found.Kind, key: found.Key, problem: found.Problem}
	}
	rec.Kind = c.kind
	switch c.kind {
	case ledger.RecordReceipt:
		rec.HoldID = ""
	case ledger.RecordSKU:
		// One repair per SKU, whatever request met it; state.lua reads
		// only the hash, and names no key.
		rec.RequestID, rec.HoldID, rec.Key, rec.Problem = "", "", cmp.Or(c.key, keys.SKUKey(rec.SKU)), c.problem
	case ledger.RecordPartitionKey:
		rec = ledger.CorruptRecord{Kind: c.kind, Key: c.key, Problem: c.problem}
	}
	return &ledger.CorruptRecordError{Record: rec, Err: err}, true
}

var _ ledger.RecordRewriter = (*RedisRestorer)(nil)

// recordKeys are the keys and the field argument of rec for
// record_probe.lua and record_repair.lua.
func recordKeys(keys Keyspace, rec ledger.CorruptRecord) (skuKeys []string, field string) {
	field = rec.RequestID
	if rec.Kind == ledger.RecordHold {
		field = rec.HoldID
	}
	return []string{keys.SKUKey(rec.SKU), keys.RequestsKey(rec.SKU)}, field
}

// ProbeRecord reads rec as the scripts read it, with its SKU's seq, in one
// script call (record_probe.lua).
func (r *RedisRestorer) ProbeRecord(ctx context.Context, rec ledger.CorruptRecord) (_ ledger.RecordProbe, err error) {
	defer translateInto(&err)
	return probeRecord(ctx, r.client, r.keys, rec)
}

func probeRecord(ctx context.Context, client redis.UniversalClient, keys Keyspace, rec ledger.CorruptRecord) (ledger.RecordProbe, error) {
	skuKeys, field := recordKeys(keys, rec)
	op := "probe the " + rec.String()
	v, err := recordProbeScript.Run(ctx, client, skuKeys, string(rec.Kind), field).Slice()
	if err != nil {
		return ledger.RecordProbe{}, fmt.Errorf("%s: %w", op, err)
	}
	rp := newReply(op, v)
	code, err := rp.outcome(subject{sku: rec.SKU})
	if err != nil || code == codeDoneBefore {
		return ledger.RecordProbe{}, err
	}
	p := ledger.RecordProbe{Corrupt: true, Seq: rp.Int(1, "seq"), Value: rp.String(2, "value")}
	return p, rp.Err()
}

// RewriteRecord writes the record that state, the ledger's fold of rec's
// SKU, holds for rec in place of the corrupt value seen, in the format the
// restore writes (ReceiptValue, HoldRecord, and H<hold_id> for the request
// id of a hold not confirmed), by compare-and-set (record_repair.lua).
func (r *RedisRestorer) RewriteRecord(ctx context.Context, rec ledger.CorruptRecord, seen string, state *domain.SKUState) (err error) {
	defer translateInto(&err)
	value := ""
	if rec.Kind == ledger.RecordHold {
		if h, ok := state.Holds[rec.HoldID]; ok {
			value = HoldRecord(h)
		}
	} else {
		value, err = requestValue(state, rec.RequestID)
		if err != nil {
			return err
		}
	}
	skuKeys, field := recordKeys(r.keys, rec)
	op := "rewrite the " + rec.String()
	v, err := recordRepairScript.Run(ctx, r.client, skuKeys, string(rec.Kind), field, seen, value).Slice()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err = newReply(op, v).outcome(subject{sku: rec.SKU})
	if errors.Is(err, ledger.ErrSeqMoved) {
		return fmt.Errorf("%w: the record changed since it was read (repaired or restored meanwhile)", err)
	}
	return err
}

// requestValue is what the requests hash holds for req once state is
// folded: its purchase's receipt, the marker of the hold it reserved while
// that is not a sale, or nothing ("").
func requestValue(state *domain.SKUState, req string) (string, error) {
	if p, ok := state.Requests[req]; ok {
		return ReceiptValue(p), nil
	}
	sku, err := domain.NewSKUID(state.SKU)
	if err != nil {
		return "", err
	}
	id, err := domain.NewRequestID(req)
	if err != nil {
		return "", err
	}
	if h, ok := state.Holds[domain.HoldIDFor(sku, id).String()]; ok {
		if marker, ok := holdMarker(h); ok {
			return marker, nil
		}
	}
	return "", nil
}

// holdMarker is the requests hash value of h's request id while h is not
// a sale: confirm replaces it with the purchase receipt.
func holdMarker(h domain.Hold) (string, bool) {
	if h.Status == domain.HoldConfirmed {
		return "", false
	}
	return "H" + h.HoldID, true
}

// matchPrefix is the HSCAN pattern of the fields starting with prefix, a
// record kind's prefix in a one-hash SKU's hash ("" matches every field,
// as each record kind of the 1.0 layout has a hash of its own). No prefix
// holds a glob character.
func matchPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "*"
}

// recordScanCount is the COUNT hint of the HSCANs that look for corrupt
// records.
const recordScanCount = 1000

// CorruptRecords finds the receipts and hold records of sku that do not
// parse as the scripts read them, and a buyer's count that does not (a
// ledger.RecordSKU): an HSCAN of its receipts (its requests hash, or the
// r: fields of a one-hash SKU's hash, records.lua) and of
// its hold records, each value checked here by a pattern every readable
// record matches, and each that does not confirmed by record_probe.lua,
// the scripts' own reader. It reads the whole SKU, so the reconciler asks
// for it only when a SKU is named, never on its periodic pass.
func (r *RedisReconcileSource) CorruptRecords(ctx context.Context, sku domain.SKUID) (_ []ledger.CorruptRecord, err error) {
	defer translateInto(&err)
	s := sku.String()
	var found []ledger.CorruptRecord
	scan := func(key, match string, readable func(string) bool, record func(field string) ledger.CorruptRecord) error {
		it := r.client.HScan(ctx, key, 0, match, recordScanCount).Iterator()
		for it.Next(ctx) {
			field := it.Val()
			if !it.Next(ctx) {
				break
			}
			if readable(it.Val()) {
				continue
			}
			rec := record(field)
			p, err := probeRecord(ctx, r.client, r.keys, rec)
			if err != nil {
				return err
			}
			if p.Corrupt {
				found = append(found, rec)
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("look for corrupt records of %s in %s: %w", s, key, err)
		}
		return nil
	}
	records, err := readRecordsOf(ctx, r.client, r.keys, s)
	if err != nil {
		return nil, err
	}
	if err := scan(records.receipts, matchPrefix(records.receiptPrefix), receiptReadable, func(field string) ledger.CorruptRecord {
		return ledger.CorruptRecord{SKU: s, Kind: ledger.RecordReceipt, RequestID: strings.TrimPrefix(field, records.receiptPrefix)}
	}); err != nil {
		return nil, err
	}
	if err := scan(r.keys.SKUKey(s), "hold:*", holdReadable, func(field string) ledger.CorruptRecord {
		return ledger.CorruptRecord{SKU: s, Kind: ledger.RecordHold, HoldID: strings.TrimPrefix(field, "hold:")}
	}); err != nil {
		return nil, err
	}
	// A buyer's count stops only that buyer, so a snapshot, which reads
	// no count, cannot see it.
	p, err := buyerFault(ctx, r.client, records)
	if err != nil {
		return nil, err
	}
	if p != "" {
		found = append(found, ledger.CorruptRecord{SKU: s, Kind: ledger.RecordSKU, Key: records.counts, Problem: p})
	}
	return found, nil
}

// readableReceipt is read_receipt's pattern (receipt.lua): every value it
// reads matches, a hold marker (H<hold_id>) aside.
var readableReceipt = regexp.MustCompile(`^(?:R[0-9]+:[^:]*:)?[0-9]+:-?[0-9]+:[0-9]+:[^:]*:`)

func receiptReadable(raw string) bool {
	return strings.HasPrefix(raw, "H") || readableReceipt.MatchString(raw)
}

// holdNumbers are the fields of a hold record (hold.lua) that read_hold
// reads as numbers; the scripts write them as integers.
var holdNumbers = []int{1, 2, 3, 4, 6}

var integer = regexp.MustCompile(`^-?[0-9]+$`)

// holdReadable tells whether raw has the shape the scripts write a hold
// record in: eleven values, the numbers integers.
func holdReadable(raw string) bool {
	values := strings.Split(raw, "\n")
	if len(values) != holdRecordValues {
		return false
	}
	for _, i := range holdNumbers {
		if !integer.MatchString(values[i]) {
			return false
		}
	}
	return true
}

// holdRecordValues is the length of hold.lua's hold_fields.
const holdRecordValues = 11
