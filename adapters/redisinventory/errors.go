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

// unavailableReplies are the error replies of a Redis that cannot serve now
// but will: loading its data, a cluster without quorum or moving a slot, a
// replica without its master, a script running too long, or memory full
// under noeviction.
var unavailableReplies = []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "BUSY", "OOM"}

// translate maps the errors of a Redis that cannot be talked to onto
// domain.ErrUnavailable, so every caller treats them as transient (HTTP 503
// with Retry-After, CLI exit 4), never as a bug; other errors pass through.
func translate(err error) error {
	if err == nil || errors.Is(err, domain.ErrUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: redis: %w", domain.ErrUnavailable, err)
}

// translateInto translates *err in place, for a deferred call at the top of
// an adapter method, so that every return path is translated.
func translateInto(err *error) { *err = translate(*err) }

func unreachable(err error) bool {
	var (
		netErr   net.Error
		redisErr redis.Error
	)
	switch {
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &redisErr):
		msg := redisErr.Error()
		for _, prefix := range unavailableReplies {
			if strings.HasPrefix(msg, prefix+" ") || msg == prefix {
				return true
			}
		}
	}
	return false
}
