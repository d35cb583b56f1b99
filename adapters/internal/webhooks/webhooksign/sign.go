// Package webhooksign signs outgoing webhooks the Standard Webhooks way
// (https://www.standardwebhooks.com), with the reference library: the
// alert webhook and the business-event webhooks share it.
package webhooksign

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// SetHeaders sets webhook-id, webhook-timestamp and webhook-signature on h
// for message id, sent at now with body. Each signer adds its signature,
// space-separated as the specification allows, so a receiver still holding
// a rotated-out secret verifies too.
func SetHeaders(h http.Header, id string, now time.Time, body []byte, signers ...*standardwebhooks.Webhook) error {
	sigs := make([]string, 0, len(signers))
	for _, s := range signers {
		sig, err := s.Sign(id, now, body)
		if err != nil {
			return fmt.Errorf("sign webhook %s: %w", id, err)
		}
		sigs = append(sigs, sig)
	}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	return nil
}
