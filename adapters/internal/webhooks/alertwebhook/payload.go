package alertwebhook

import (
	"time"

	"github.com/invledger/invledger/adapters/internal/reconcilejson"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Kinds of alert, the "kind" of a webhookAlert.
const (
	kindFinding    = "reconciliation_finding"
	kindDeadLetter = "dead_letter"
	kindFenced     = "fenced_skus"
	// kindUnsafeRedis: sales stopped because Redis could lose them;
	// kindSafeRedis: its settings are safe again and sales resumed.
	kindUnsafeRedis = "unsafe_redis"
	kindSafeRedis   = "redis_safe_again"
)

// Severities of an alert.
const (
	severityCritical = "critical"
	severityWarning  = "warning"
)

// webhookAlert is the JSON body POSTed to the webhook. Kind says which of
// the optional parts is set.
type webhookAlert struct {
	// Kind is "reconciliation_finding", "dead_letter", "fenced_skus",
	// "unsafe_redis" or "redis_safe_again".
	Kind     string    `json:"kind"`
	Severity string    `json:"severity"`
	At       time.Time `json:"at"`
	// Finding is set for reconciliation_finding.
	Finding *wire.FindingJSON `json:"finding,omitempty"`
	// DeadLetter is set for dead_letter: a stream entry that was not projected.
	DeadLetter *webhookDeadLetter `json:"dead_letter,omitempty"`
	// Fenced is set for fenced_skus: SKUs still refusing purchases after a
	// verification pass.
	Fenced *webhookFenced `json:"fenced,omitempty"`
	// UnsafeRedis is set for unsafe_redis: what is wrong and how to fix it.
	UnsafeRedis *webhookUnsafeRedis `json:"unsafe_redis,omitempty"`
}

// webhookUnsafeRedis says why sales stopped.
type webhookUnsafeRedis struct {
	Reason string `json:"reason"`
}

// webhookDeadLetter describes an entry stored in dead_letters.
type webhookDeadLetter struct {
	Stream   string `json:"stream"`
	StreamID string `json:"stream_id"`
	Reason   string `json:"reason"`
}

// webhookFenced counts SKUs left fenced after Redis restarted.
type webhookFenced struct {
	Count int `json:"count"`
}

func newWebhookFinding(f reconcile.Finding) *wire.FindingJSON {
	out := reconcilejson.NewFinding(f)
	return &out
}

// severity rates a finding as the webhook schema documents it: redis_high
// and ledger_gap are critical, every other class a warning.
func severity(f reconcile.Finding) string {
	if f.Class == reconcile.ClassRedisHigh || f.Class == reconcile.ClassLedgerGap {
		return severityCritical
	}
	return severityWarning
}
