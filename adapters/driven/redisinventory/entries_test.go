package redisinventory_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/driven/redisinventory"
	"github.com/invledger/invledger/domain"
)

// entryEvents decodes one partition stream entry into its events, in the
// entry format v2 (docs/storage.md): field e holds one line per event, and
// every other field present holds as many lines, line i being event i's.
// An entry of one event is read whole, as 1.0.0 wrote it.
func entryEvents(t testing.TB, m redis.XMessage) []domain.Event {
	t.Helper()
	fields := redisinventory.EntryFields(m.Values)
	lines := strings.Split(fields["e"], "\n")
	if len(lines) == 1 {
		fields[redisinventory.StreamIDField] = m.ID
		return []domain.Event{must(redisinventory.ParseEntry(fields))}
	}
	events := make([]domain.Event, len(lines))
	for i := range lines {
		one := map[string]string{redisinventory.StreamIDField: m.ID}
		for k, v := range fields {
			column := strings.Split(v, "\n")
			if len(column) != len(lines) {
				t.Fatalf("entry %s: field %s has %d lines, e has %d", m.ID, k, len(column), len(lines))
			}
			if column[i] != "" {
				one[k] = column[i]
			}
		}
		e, err := redisinventory.ParseEntry(one)
		if err != nil {
			t.Fatalf("entry %s event %d: %v", m.ID, i, err)
		}
		events[i] = e
	}
	return events
}
