package domain

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MinSealSecret is the shortest seal secret accepted, in bytes: an HMAC-SHA256
// key shorter than the hash gains nothing from the hash's strength.
const MinSealSecret = 32

var sealKeyID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// SealKey is one secret that keys the ledger's seals and checkpoints, named
// by ID in every seal it made so keys can rotate.
type SealKey struct {
	ID     string
	secret []byte
}

// NewSealKey returns a key with id ([A-Za-z0-9._-], 1-32 characters) and a
// secret of at least MinSealSecret bytes.
func NewSealKey(id string, secret []byte) (SealKey, error) {
	var errs []error
	if !sealKeyID.MatchString(id) {
		// Not quoted: a mistyped entry may hold part of a secret.
		errs = append(errs, errors.New("a seal key id must be 1-32 of A-Z a-z 0-9 . _ -"))
	} else if len(secret) < MinSealSecret {
		errs = append(errs, fmt.Errorf("seal key %q: the secret must be at least %d bytes, got %d (e.g. openssl rand -hex 32)", id, MinSealSecret, len(secret)))
	}
	if err := errors.Join(errs...); err != nil {
		return SealKey{}, err
	}
	return SealKey{ID: id, secret: append([]byte(nil), secret...)}, nil
}

// SealKeys are the configured seal keys: the first signs new seals and
// checkpoints, every one verifies. The zero value has no key: the sealer
// then writes unkeyed seals.
type SealKeys struct {
	keys    []SealKey
	retired []string
}

// NewSealKeys returns keys, the first being the signing key. Ids must be
// unique.
func NewSealKeys(keys ...SealKey) (SealKeys, error) {
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.ID] {
			return SealKeys{}, fmt.Errorf("seal key id %q is given twice", k.ID)
		}
		seen[k.ID] = true
	}
	return SealKeys{keys: append([]SealKey(nil), keys...)}, nil
}

// ParseSealKeys reads id:secret entries separated by commas or newlines,
// newest (the signing key) first; blank entries and lines starting with #
// are skipped. The secret is used as given, as bytes. Errors never show a
// secret.
func ParseSealKeys(s string) (SealKeys, error) {
	var (
		keys []SealKey
		errs []error
	)
	for n, entry := range SplitListSetting(s) {
		where := fmt.Sprintf("seal key entry %d (line %d)", n+1, entry.Line)
		id, secret, ok := strings.Cut(entry.Text, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not id:secret", where))
			continue
		}
		k, err := NewSealKey(id, []byte(secret))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		keys = append(keys, k)
	}
	if err := errors.Join(errs...); err != nil {
		return SealKeys{}, err
	}
	return NewSealKeys(keys...)
}

// Empty says no key is configured.
func (k SealKeys) Empty() bool { return len(k.keys) == 0 }

// Signing is the key new seals and checkpoints are made with.
func (k SealKeys) Signing() (SealKey, bool) {
	if len(k.keys) == 0 {
		return SealKey{}, false
	}
	return k.keys[0], true
}

// Lookup finds the key named id.
func (k SealKeys) Lookup(id string) (SealKey, bool) {
	for _, key := range k.keys {
		if key.ID == id {
			return key, true
		}
	}
	return SealKey{}, false
}

// IDs lists the key ids, the signing key's first.
func (k SealKeys) IDs() []string {
	ids := make([]string, len(k.keys))
	for i, key := range k.keys {
		ids[i] = key.ID
	}
	return ids
}

// WithRetired returns k with ids declared retired: keys that sealed rows
// and checkpoints once and were destroyed in good faith. What they sealed
// can no longer be checked, and a verifier says so without calling it
// tampered; a key id neither among the keys nor declared retired is
// tamper evidence, since the database that holds the id is writable by
// whoever tampered with it. The declaration comes from outside the
// database for the same reason. An id cannot be both a key and retired.
func (k SealKeys) WithRetired(ids ...string) (SealKeys, error) {
	var errs []error
	retired := append([]string(nil), k.retired...)
	for n, id := range ids {
		switch {
		case !sealKeyID.MatchString(id):
			// Not quoted: a key pasted here by mistake holds its secret.
			errs = append(errs, fmt.Errorf("retired seal key entry %d: a seal key id must be 1-32 of A-Z a-z 0-9 . _ -", n+1))
		case k.hasKey(id):
			errs = append(errs, fmt.Errorf("seal key id %q is given as a key and declared retired: a retired key is one whose secret is gone", id))
		case !slices.Contains(retired, id):
			retired = append(retired, id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return SealKeys{}, err
	}
	return SealKeys{keys: k.keys, retired: retired}, nil
}

// Retired says id was declared retired.
func (k SealKeys) Retired(id string) bool { return slices.Contains(k.retired, id) }

// RetiredIDs lists the ids declared retired.
func (k SealKeys) RetiredIDs() []string { return slices.Clone(k.retired) }

func (k SealKeys) hasKey(id string) bool {
	_, ok := k.Lookup(id)
	return ok
}

// matching returns the first key for which made says it made a MAC: how a
// verifier tells a key id edited on an authentic seal or checkpoint.
func (k SealKeys) matching(made func(SealKey) bool) (SealKey, bool) {
	for _, key := range k.keys {
		if made(key) {
			return key, true
		}
	}
	return SealKey{}, false
}
