package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// goRedisUnavailable are the texts of go-redis's own errors for a
// deployment it cannot reach: no cluster node known, or no Sentinel
// answering. go-redis exports no sentinel value for them.
var goRedisUnavailable = []string{
	"redis: cluster has no nodes",
	"redis: all sentinels specified in configuration are unreachable",
}

// Translate maps the errors of a Redis that cannot serve now but will onto
// domain.ErrUnavailable, so every caller treats them as transient (HTTP 503
// with Retry-After, CLI exit 4), never as a bug; other errors pass through.
// See Unavailable for the list.
func Translate(err error) error {
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !Unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: redis: %w", domain.ErrUnavailable, err)
}

func translate(err error) error { return Translate(err) }

// translateInto translates *err in place, for a deferred call at the top of
// an adapter method, so that every return path is translated.
func translateInto(err *error) { *err = translate(*err) }

// Unavailable reports whether err means Redis cannot serve now but will:
// a node that refuses connections, drops them or does not answer in time;
// a node loading its data (LOADING); a cluster without quorum or coverage
// (CLUSTERDOWN), moving a slot (TRYAGAIN, or MOVED and ASK still answered
// after go-redis's redirects ran out); a replica not yet promoted (READONLY,
// MASTERDOWN, NOREPLICAS); a script running too long (BUSY); memory full
// under noeviction (OOM); or no cluster node or Sentinel reachable at all.
func Unavailable(err error) bool {
	var netErr net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, context.DeadlineExceeded),
		redis.IsLoadingError(err), redis.IsClusterDownError(err), redis.IsTryAgainError(err),
		redis.IsMasterDownError(err), redis.IsReadOnlyError(err), redis.IsNoReplicasError(err),
		redis.IsOOMError(err), redis.IsMaxClientsError(err):
		return true
	}
	if _, moved := redis.IsMovedError(err); moved {
		return true
	}
	if _, ask := redis.IsAskError(err); ask {
		return true
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) && (strings.HasPrefix(redisErr.Error(), "BUSY ") || redisErr.Error() == "BUSY") {
		return true
	}
	msg := err.Error()
	for _, s := range goRedisUnavailable {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
