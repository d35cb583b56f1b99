package server

import (
	"container/list"
	"net"
	"testing"
)

// TestCountedConnReleasesOnce closes a connection twice: its slot, in all
// and for its client, comes back once.
func TestCountedConnReleasesOnce(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	l := &limitListener{open: 2, byClient: map[string]int{"192.0.2.1": 2}, evictable: list.New()}
	c := &countedConn{Conn: a, l: l, client: "192.0.2.1"}
	c.elem = l.evictable.PushBack(c)
	_ = c.Close()
	_ = c.Close()
	if l.open != 1 || l.byClient["192.0.2.1"] != 1 || l.evictable.Len() != 0 {
		t.Fatalf("after two closes: open %d, client's %d, evictable %d; want 1, 1, 0", l.open, l.byClient["192.0.2.1"], l.evictable.Len())
	}
}
