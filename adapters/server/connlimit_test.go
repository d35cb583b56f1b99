package server

import (
	"net"
	"testing"
)

// TestCountedConnReleasesOnce closes a connection twice: its slot, in all
// and for its client, comes back once.
func TestCountedConnReleasesOnce(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	p := newPool(2, 0)
	p.open, p.byClient["192.0.2.1"] = 2, 2
	c := &countedConn{Conn: a, p: p, client: "192.0.2.1"}
	c.elem = p.evictable.PushBack(c)
	_ = c.Close()
	_ = c.Close()
	if p.open != 1 || p.byClient["192.0.2.1"] != 1 || p.evictable.Len() != 0 {
		t.Fatalf("after two closes: open %d, client's %d, evictable %d; want 1, 1, 0", p.open, p.byClient["192.0.2.1"], p.evictable.Len())
	}
}
