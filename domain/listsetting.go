package domain

import "strings"

// ListEntry is one entry of a list setting and the 1-based line it is on.
type ListEntry struct {
	Line int
	Text string
}

// SplitListSetting splits a list setting (INVLEDGER_TOKENS,
// INVLEDGER_SEAL_KEYS, or the content of a file holding one) into its
// entries: separated by commas or newlines, trimmed, blank ones skipped,
// and a line whose first non-blank character is # is a comment. One
// syntax for every list of credentials, so a file written for one reads as
// the others do.
func SplitListSetting(s string) []ListEntry {
	var entries []ListEntry
	for i, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		for _, entry := range strings.Split(line, ",") {
			if entry = strings.TrimSpace(entry); entry != "" {
				entries = append(entries, ListEntry{Line: i + 1, Text: entry})
			}
		}
	}
	return entries
}
