package webhooksign_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/webhooks/webhooksign"
)

func newWebhook(t *testing.T, secret string) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestSignedHeadersVerifyWithTheReferenceLibrary: what SetHeaders writes,
// a receiver verifies with the Standard Webhooks library, with the current
// or the rotated-out secret; a changed body, id or timestamp, or another
// secret, fails.
func TestSignedHeadersVerifyWithTheReferenceLibrary(t *testing.T) {
	current := newWebhook(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	previous := newWebhook(t, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	stranger := newWebhook(t, "whsec_dGhpcyBpcyBub3QgdGhlIHNlY3JldCEhIQ==")
	body := []byte(`{"type":"deducted","sku":"a","seq":1}`)
	now := time.Now()

	h := http.Header{}
	if err := webhooksign.SetHeaders(h, "msg_1", now, body, current, previous); err != nil {
		t.Fatal(err)
	}
	if got := h.Get(standardwebhooks.HeaderWebhookID); got != "msg_1" {
		t.Errorf("webhook-id = %q, want msg_1", got)
	}
	if got := h.Get(standardwebhooks.HeaderWebhookTimestamp); got != strconv.FormatInt(now.Unix(), 10) {
		t.Errorf("webhook-timestamp = %q, want %d", got, now.Unix())
	}
	sigs := strings.Fields(h.Get(standardwebhooks.HeaderWebhookSignature))
	if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") || sigs[0] == sigs[1] {
		t.Errorf("webhook-signature = %q, want two different v1 signatures, space-separated", sigs)
	}
	for name, wh := range map[string]*standardwebhooks.Webhook{"current": current, "previous": previous} {
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("the %s secret does not verify: %v", name, err)
		}
	}
	if err := stranger.Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("another secret verified: %v", err)
	}

	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] = '2'
	if err := current.Verify(tampered, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("a tampered body verified: %v", err)
	}
	for header, value := range map[string]string{
		standardwebhooks.HeaderWebhookID:        "msg_2",
		standardwebhooks.HeaderWebhookTimestamp: strconv.FormatInt(now.Unix()-1, 10),
	} {
		changed := h.Clone()
		changed.Set(header, value)
		if err := current.Verify(body, changed); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("a changed %s verified: %v", header, err)
		}
	}
}
