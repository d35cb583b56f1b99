package server

import (
	"context"
	"log/slog"
	"os"

	"github.com/invledger/invledger/adapters/internal/httpapi"
)

// tokenReloader re-reads the API's tokens into the set the API
// authenticates against.
type tokenReloader struct {
	set          *httpapi.TokenSet
	inline, file string
	log          *slog.Logger
}

// run reloads the tokens on every signal on hup until ctx ends.
func (r tokenReloader) run(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = r.reload()
		}
	}
}

// reload reads the tokens again and swaps them in. A file that cannot be
// read or parsed is refused, logged at ERROR, and the tokens in use stay.
func (r tokenReloader) reload() error {
	tokens, err := loadTokens(r.inline, r.file)
	if err == nil {
		err = r.set.Replace(tokens)
	}
	if err != nil {
		r.log.Error("tokens reload refused; the tokens in use are kept", "file", r.file, "err", err)
		return err
	}
	r.log.Info("tokens reloaded", "file", r.file, "tokens", len(tokens))
	return nil
}
