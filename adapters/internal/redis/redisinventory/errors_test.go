package redisinventory

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// replyError is a Redis error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestTranslateMakesAnUnreachableRedisUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable bool
	}{
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("script: %w", io.EOF), true},
		{redis.ErrClosed, true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{replyError("BUSY Redis is busy running a script"), true},
		{replyError("MOVED 3999 127.0.0.1:6381"), true},
		{replyError("ASK 3999 127.0.0.1:6381"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{replyError("NOREPLICAS Not enough good replicas to write."), true},
		{fmt.Errorf("deduct: %w", errors.New("redis: cluster has no nodes")), true},
		{errors.New("redis: all sentinels specified in configuration are unreachable"), true},
		{replyError("BUSYKEY Target key name already exists."), false},
		{replyError("NOSCRIPT No matching script"), false},
		{replyError("ERR wrong number of arguments"), false},
		{ErrScript, false},
		{domain.ErrSoldOut, false},
	} {
		got := translate(tc.err)
		if errors.Is(got, domain.ErrUnavailable) != tc.unavailable || !errors.Is(got, tc.err) {
			t.Errorf("translate(%v) = %v, want unavailable %v and the cause kept", tc.err, got, tc.unavailable)
		}
	}
	if translate(nil) != nil {
		t.Error("translate(nil) is not nil")
	}
}
