package domain

import (
	"errors"
	"slices"
	"testing"
)

func TestValidateWebhookNamesTheField(t *testing.T) {
	types, err := ValidateWebhook("https://shop.example/hooks/a b/\U0001f600", []string{"deducted", "sold_out", "deducted"})
	if err != nil || !slices.Equal(types, []string{"deducted", "sold_out"}) {
		t.Fatalf("valid subscription: %v %v", types, err)
	}
	for _, c := range []struct {
		url   string
		types []string
		field string
	}{
		{"ftp://shop.example/", []string{"deducted"}, "url"},
		{"/hooks", []string{"deducted"}, "url"},
		{"https://user:secret@shop.example/hooks", []string{"deducted"}, "url"},
		{"https://token@shop.example/hooks", []string{"deducted"}, "url"},
		{"https://shop.example/\u202ekoohs", []string{"deducted"}, "url"}, // a bidirectional override
		{"https://shop.example/a\u0085b", []string{"deducted"}, "url"},    // a C1 control, which url.Parse takes
		{"https://shop\U000e0001.example/", []string{"deducted"}, "url"},
		{"https://shop.example/", nil, "event_types"},
		{"https://shop.example/", []string{"stocked"}, "event_types"},
	} {
		_, err := ValidateWebhook(c.url, c.types)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidateWebhook(%q, %v) = %v, want a FieldError naming %s", c.url, c.types, err, c.field)
		}
	}
}

func TestWebhookMessagesDeriveSoldOut(t *testing.T) {
	last := Event{ID: "e1", Type: EventDeducted, Delta: -2, Balance: 0}
	got := WebhookMessages(last)
	want := []WebhookMessage{{"evt_e1", "deducted"}, {"evt_e1_sold_out", WebhookSoldOut}}
	if !slices.Equal(got, want) {
		t.Errorf("last units: %v, want %v", got, want)
	}
	if got := WebhookMessages(Event{ID: "e2", Type: EventReleased, Delta: 1, Balance: 1}); len(got) != 1 || got[0].Type != "released" {
		t.Errorf("release: %v", got)
	}
	if got := WebhookMessages(Event{ID: "e3", Type: EventStocked, Delta: 0, Balance: 0}); len(got) != 0 {
		t.Errorf("stocked with no stock announces %v, want nothing", got)
	}
}

func FuzzValidateWebhook(f *testing.F) {
	f.Add("https://shop.example/hooks", "deducted")
	f.Add("http://[::1]:8080/x?y", "sold_out")
	f.Add("https://", "")
	f.Fuzz(func(t *testing.T, url, typ string) {
		types, err := ValidateWebhook(url, []string{typ})
		if err == nil && (len(types) != 1 || !slices.Contains(WebhookEventTypes, types[0]) || len(url) > MaxWebhookURL) {
			t.Fatalf("accepted %q %q as %v", url, typ, types)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error without a field: %v", err)
		}
	})
}
