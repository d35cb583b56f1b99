package server

import (
	"net"
	"testing"
)

// TestCountedConnReleasesOnce closes a connection twice: its slot comes
// back once.
func TestCountedConnReleasesOnce(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	released := 0
	c := &countedConn{Conn: a, release: func() { released++ }}
	_ = c.Close()
	_ = c.Close()
	if released != 1 {
		t.Fatalf("released %d times, want 1", released)
	}
}
