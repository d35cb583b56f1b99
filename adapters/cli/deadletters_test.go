package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// TestDeadLetterCommands: a dead-lettered entry whose cause is fixed is
// replayed through the projector's decoder and append, once, and one that
// still does not decode is refused and can be resolved with a note; each
// action names the OS user who ran it.
func TestDeadLetterCommands(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "dl-1", 5, 1)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("dl-1", "u1", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	// The stocked event is projected; the deduction was dead-lettered (say,
	// by a projector bug since fixed), and a copy of it mangled beyond repair.
	stream := s.Keyspace.SKUStreamKey("dl-1")
	msgs, err := s.RedisClient.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("stream: %v %v", msgs, err)
	}
	fields := func(i int) map[string]string {
		f := streamentry.EntryFields(msgs[i].Values)
		f[streamentry.StreamIDField] = msgs[i].ID
		return f
	}
	stocked, err := streamentry.ParseEntry(fields(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Projection.AppendBatch(ctx, []domain.Event{stocked}); err != nil {
		t.Fatal(err)
	}
	if err := s.Projection.AddDeadLetter(ctx, stream, msgs[1].ID, 0, fields(1), "projector bug"); err != nil {
		t.Fatal(err)
	}
	mangled := fields(1)
	packed := strings.Split(mangled["e"], " ") // event_id type sku seq qty balance
	packed[3] = "x"
	mangled["e"] = strings.Join(packed, " ")
	if err := s.Projection.AddDeadLetter(ctx, stream, "0-1", 0, mangled, "seq: not an integer"); err != nil {
		t.Fatal(err)
	}
	me, _ := user.Current()
	actor := "cli:" + me.Username

	out, _, err := runCLI(t, s, "dead-letters", "list", "--status", "open", "--limit", "1", "--format", "json")
	var page wire.DeadLetterPageJSON
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.DeadLetters) != 1 || page.NextAfter == nil {
		t.Fatalf("list page 1: %v\n%s", err, out)
	}
	good, bad := page.DeadLetters[0].ID, *page.NextAfter+1
	for range 2 { // replay is idempotent
		out, _, err = runCLI(t, s, "dead-letters", "replay", strconv.FormatInt(good, 10))
		var dl wire.DeadLetterJSON
		if err != nil || json.Unmarshal([]byte(out), &dl) != nil || dl.Status != "replayed" || *dl.HandledBy != actor {
			t.Fatalf("replay: %v\n%s", err, out)
		}
	}
	var rows, sum int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), sum(delta) FROM ledger_entries WHERE sku = 'dl-1'`).Scan(&rows, &sum); err != nil || rows != 2 || sum != 4 {
		t.Fatalf("ledger after replay: %d rows, stock %d, %v; want 2 rows, stock 4", rows, sum, err)
	}

	if _, _, err := runCLI(t, s, "dead-letters", "replay", strconv.FormatInt(bad, 10)); exitCode(err) != exitRefused || !strings.Contains(err.Error(), "seq") {
		t.Fatalf("replay of a still malformed entry: %v (exit %d), want refused naming seq", err, exitCode(err))
	}
	if _, _, err := runCLI(t, s, "dead-letters", "resolve", strconv.FormatInt(bad, 10)); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "note") {
		t.Fatalf("resolve without a note: %v, want a usage error naming note (a required flag, issue 17)", err)
	}
	out, _, err = runCLI(t, s, "dead-letters", "resolve", strconv.FormatInt(bad, 10), "--note", "garbage written by a test tool")
	var dl wire.DeadLetterJSON
	if err != nil || json.Unmarshal([]byte(out), &dl) != nil || dl.Status != "resolved" || *dl.HandledBy != actor || *dl.Note != "garbage written by a test tool" {
		t.Fatalf("resolve: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, s, "dead-letters", "replay", strconv.FormatInt(bad, 10)); exitCode(err) != exitRefused {
		t.Fatalf("replay of a resolved letter: %v, want refused", err)
	}
	var actions []string
	rs, err := s.Pool.Query(ctx, `SELECT action || ' by ' || actor FROM dead_letter_actions ORDER BY id`)
	if err == nil {
		actions, err = pgx.CollectRows(rs, pgx.RowTo[string])
	}
	want := fmt.Sprint([]string{"replay by " + actor, "replay_failed by " + actor, "resolve by " + actor})
	if err != nil || fmt.Sprint(actions) != want {
		t.Fatalf("actions: %v %v, want %s", actions, err, want)
	}
}

// TestDeadLettersOverHTTP: operators list, replay and resolve dead letters
// over the API, recorded with the token's name; other roles may not.
func TestDeadLettersOverHTTP(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	conn, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id int
	if err := conn.QueryRow(context.Background(), `INSERT INTO dead_letters (stream, stream_id, fields, error)
		VALUES ('inv:{p00}:events', '1-1', '{"type":"bogus"}', 'type: bogus') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	page := s.must(200, "GET", "/v1/dead-letters?status=open", aliceOp, "")
	if items := page["dead_letters"].([]any); len(items) != 1 || page["next_after"] != nil ||
		items[0].(map[string]any)["fields"].(map[string]any)["type"] != "bogus" {
		t.Fatalf("list: %v", page)
	}
	for _, tok := range []string{auditorTok, bobApp} {
		if code, _ := s.call("GET", "/v1/dead-letters", tok, ""); code != 403 {
			t.Fatalf("list with a non-operator token: %d, want 403", code)
		}
	}
	if code, m := s.call("GET", "/v1/dead-letters?stauts=open", aliceOp, ""); code != 400 || m["field"] != "stauts" {
		t.Fatalf("unknown parameter: %d %v", code, m)
	}
	path := fmt.Sprintf("/v1/dead-letters/%d/", id)
	if code, m := s.call("POST", path+"replay", aliceOp, ""); code != 409 || m["error"] != "conflict" {
		t.Fatalf("replay of a malformed entry: %d %v, want 409 conflict", code, m)
	}
	if code, m := s.call("POST", path+"resolve", aliceOp, `{"note":"  "}`); code != 400 || m["field"] != "note" {
		t.Fatalf("resolve with a blank note: %d %v, want 400 naming note", code, m)
	}
	res := s.must(200, "POST", path+"resolve", aliceOp, `{"note":"test garbage"}`)
	if res["status"] != "resolved" || res["handled_by"] != "alice" || res["note"] != "test garbage" {
		t.Fatalf("resolve: %v", res)
	}
	if code, _ := s.call("POST", "/v1/dead-letters/999/replay", aliceOp, ""); code != 404 {
		t.Fatalf("replay of an unknown letter: %d, want 404", code)
	}
	if page := s.must(200, "GET", "/v1/dead-letters?status=open", aliceOp, ""); len(page["dead_letters"].([]any)) != 0 {
		t.Fatalf("open after resolve: %v", page)
	}
}
