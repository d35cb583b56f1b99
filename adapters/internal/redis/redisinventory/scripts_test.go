package redisinventory

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// BatchScript is batch.lua as the table builds it, for the tests that
// run it by hand, outside RedisInventory.
var BatchScript = batchScript.Script

// BatchScriptSource is batch.lua with its fragments, as the table builds it.
func BatchScriptSource() string {
	var body strings.Builder
	for _, f := range batchScript.fragments {
		body.WriteString(luaFile(string(f)))
	}
	return body.String() + luaFile(batchScript.file)
}

// UseBatchScript makes r run source instead of batch.lua.
func UseBatchScript(r *RedisInventory, source string) {
	r.script = &luaScript{Script: redis.NewScript(source), file: "batch.lua (a test's copy)"}
}

// HoldBatches makes the attempts on sku's partition wait as if every call
// slot of it were taken, so a test decides what each call holds: waiting
// tells how many wait, and send takes them, in arrival order, in calls of
// at most MaxBatch, each taken while the ones before it are in flight, and
// returns once every attempt is answered. The calls reach Redis in the
// order they were taken, so what each judges is known.
func HoldBatches(r *RedisInventory, sku domain.SKUID) (waiting func() int, send func()) {
	b := r.batches
	q := &partitionQueue{partition: r.keys.Partition(sku.String()), inFlight: b.inFlight}
	b.mu.Lock()
	if _, busy := b.queues[q.partition]; busy {
		panic("HoldBatches: a call for the partition of " + sku.String() + " is in flight")
	}
	b.queues[q.partition] = q
	b.mu.Unlock()
	waiting = func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(q.waiting)
	}
	send = func() {
		var calls [][]*attempt
		for batch := b.next(q); batch != nil; batch = b.next(q) {
			calls = append(calls, batch)
		}
		// Each call leaves once the one before it was answered, from a
		// goroutine of its own.
		var wg sync.WaitGroup
		turn := make(chan struct{})
		close(turn)
		for _, batch := range calls {
			prev, next := turn, make(chan struct{})
			turn = next
			wg.Go(func() {
				<-prev
				ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
				defer cancel()
				b.send(ctx, q, batch)
				close(next)
			})
		}
		wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		q.inFlight = 0
		delete(b.queues, q.partition)
	}
	return waiting, send
}

// privateRedis starts a Redis of the test's own, with a client and the
// default key layout.
func privateRedis(t *testing.T) (*redis.Client, Keyspace) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: localstacktest.Redis(t).Addr()})
	t.Cleanup(func() { _ = client.Close() })
	keys, err := NewKeyspace(DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	return client, keys
}

// TestEveryLuaFileIsInTheScriptTable keeps the table whole: a .lua file
// that is neither a script nor a fragment of one would never run, and a
// file used both ways would run its body inside another script.
func TestEveryLuaFileIsInTheScriptTable(t *testing.T) {
	t.Parallel()
	roles := map[string]string{}
	for _, s := range scripts {
		if roles[s.file] != "" {
			t.Errorf("%s is in the table twice", s.file)
		}
		roles[s.file] = "script"
	}
	for _, s := range scripts {
		for _, f := range s.fragments {
			if roles[string(f)] == "script" {
				t.Errorf("%s is a script and a fragment of %s", f, s.file)
			}
			roles[string(f)] = "fragment"
		}
	}
	files, err := fs.Glob(luaFiles, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(roles) {
		t.Errorf("%d .lua files, %d in the table", len(files), len(roles))
	}
	for _, f := range files {
		if roles[f] == "" {
			t.Errorf("%s is neither a script of the table nor a fragment of one", f)
		}
	}
}

// TestLoadPreloadsEveryScript runs Load on a real Redis, which compiles
// each script of the table (SCRIPT LOAD), and checks that Redis then
// holds every one.
func TestLoadPreloadsEveryScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, keys := privateRedis(t)
	inv, err := NewRedisInventory(client, keys, InventoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Load(ctx); err != nil {
		t.Fatal(err)
	}
	hashes := make([]string, len(scripts))
	for i, s := range scripts {
		hashes[i] = s.Hash()
	}
	loaded, err := client.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range loaded {
		if !ok {
			t.Errorf("%s is not loaded", scripts[i].file)
		}
	}
}

// replyCodeLiteral finds the codes a script returns literally: as the
// first element of a table ({-1}, {0, stock}), as a whole reply
// (return -13), or as the code of a hold reply.
var replyCodeLiteral = regexp.MustCompile(`\{(-?\d+)[,}]|return (-?\d+)\b|hold_reply\((-?\d+)|or (-\d+),`)

// TestEveryCodeAScriptGivesHasAMeaning checks the Lua side against
// codes.go: every code a script can answer is an outcome its decoder
// handles or a refusal with its own error, never an unknown code.
func TestEveryCodeAScriptGivesHasAMeaning(t *testing.T) {
	t.Parallel()
	seen := 0
	for _, s := range scripts {
		for _, m := range replyCodeLiteral.FindAllStringSubmatch(luaFile(s.file), -1) {
			lit := m[1] + m[2] + m[3] + m[4]
			n, err := strconv.ParseInt(lit, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			seen++
			code := replyCode(n)
			if code == codeDone || code == codeDoneBefore || code == codeLive {
				continue
			}
			if code == codeCorruptRecord {
				// A corrupt record is reported as one, of the kind named.
				rp := newReply(s.file, []any{n, "hold", "malformed hold record: x"})
				err := refusal(rp, code, subject{sku: "s"})
				if kind, ok := corruptKind(err); !ok || kind != "hold" || !errors.Is(err, ErrScript) {
					t.Errorf("%s answers %d: refusal gives %v, want a corrupt hold record", s.file, n, err)
				}
				continue
			}
			if code == codeCorruptSKU {
				// A SKU state that does not read is reported as one, with
				// the key and what was read.
				rp := newReply(s.file, []any{n, "inv:{p00}:sku:s", "malformed sku state: stock is \"x\""})
				err := refusal(rp, code, subject{sku: "s"})
				c, ok := corruptOf(err)
				if !ok || c.kind != ledger.RecordSKU || c.key != "inv:{p00}:sku:s" || c.problem != `stock is "x"` || !errors.Is(err, ErrScript) {
					t.Errorf("%s answers %d: refusal gives %v (%+v), want a corrupt sku state naming key and problem", s.file, n, err, c)
				}
				continue
			}
			rp := newReply(s.file, []any{n, int64(1), int64(2)})
			if err := refusal(rp, code, subject{sku: "s"}); err == nil || errors.Is(err, ErrScript) {
				t.Errorf("%s answers %d, which refusal does not know: %v", s.file, n, err)
			}
		}
	}
	if seen < 40 {
		t.Fatalf("found %d codes in the scripts: the pattern no longer matches how they reply", seen)
	}
}
