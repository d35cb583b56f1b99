package app

import (
	"strings"
	"testing"
)

// TestRefusedAlertWebhookIsRedacted: a refused --alert-webhook is named in
// the error without its password, since the setting may carry credentials.
func TestRefusedAlertWebhookIsRedacted(t *testing.T) {
	for _, hook := range []string{
		"ftp://ops:" + testPassword + "@alerts.example/hook",
		"https://ops:" + testPassword + "@/hook",
	} {
		err := Config{AlertWebhook: hook}.Validate()
		if err == nil || !strings.Contains(err.Error(), "--alert-webhook") {
			t.Fatalf("%s: want an --alert-webhook error, got %v", RedactURL(hook), err)
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
