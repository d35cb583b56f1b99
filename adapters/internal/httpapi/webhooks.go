package httpapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// WebhookManager manages business-event webhook subscriptions.
// *ledger.Webhooks implements it; the creator is the request's principal.
type WebhookManager interface {
	Create(ctx context.Context, url string, types []string) (domain.WebhookSubscription, error)
	List(ctx context.Context) ([]domain.WebhookSubscription, error)
	Delete(ctx context.Context, id string) error
	Rotate(ctx context.Context, id string) (domain.WebhookSubscription, error)
}

var _ WebhookManager = (*ledger.Webhooks)(nil)

// NewWebhookJSON maps w into its JSON shape, without its secrets: nor
// the user:password@ of a URL subscribed before such URLs were refused.
func NewWebhookJSON(w domain.WebhookSubscription) wire.WebhookJSON {
	j := wire.WebhookJSON{ID: w.ID, URL: withoutUserinfo(w.URL), EventTypes: w.EventTypes, CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt}
	if w.PreviousSecret != "" {
		at := w.PreviousExpiresAt
		j.PreviousSecretExpiresAt = &at
	}
	return j
}

// withoutUserinfo is rawURL without its user:password@.
func withoutUserinfo(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	u.User = nil
	return u.String()
}

// newWebhookWithSecret is NewWebhookJSON with the current secret, for
// the answers that show it once.
func newWebhookWithSecret(w domain.WebhookSubscription) wire.WebhookJSON {
	j := NewWebhookJSON(w)
	j.Secret = w.Secret
	return j
}

// createWebhook is POST /v1/webhooks {"url","event_types"}: 201 with the
// subscription and its secret, shown only here and on rotate.
func (s *server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var req wire.WebhookBody
	body, err := s.body(w, r)
	if err == nil {
		err = decodeJSON(body, &req)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sub, err := s.webhooks.Create(r.Context(), req.URL, req.EventTypes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusCreated, newWebhookWithSecret(sub))
}

// listWebhooks is GET /v1/webhooks: every subscription, without secrets.
func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if _, err := queryParams(r); err != nil {
		s.fail(w, r, err)
		return
	}
	subs, err := s.webhooks.List(r.Context())
	answer(s, w, r, subs, err, func(subs []domain.WebhookSubscription) wire.WebhookListJSON {
		return wire.WebhookListJSON{Webhooks: append([]wire.WebhookJSON{}, mapSlice(subs, NewWebhookJSON)...)}
	})
}

// deleteWebhook is DELETE /v1/webhooks/{webhook_id}: 204; nothing more is
// delivered to it. 404 when there is no such subscription.
func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.webhooks.Delete(r.Context(), r.PathValue("webhook_id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// rotateWebhook is POST /v1/webhooks/{webhook_id}/rotate: 200 with the new secret.
// The old one keeps signing deliveries beside it until
// previous_secret_expires_at.
func (s *server) rotateWebhook(w http.ResponseWriter, r *http.Request) {
	sub, err := s.webhooks.Rotate(r.Context(), r.PathValue("webhook_id"))
	answer(s, w, r, sub, err, newWebhookWithSecret)
}
