package domain

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SealHead is where a SKU's chain stood: the seq and hash of its last seal.
type SealHead struct {
	SKU  string
	Seq  int64
	Hash string
}

// Checkpoint is a keyed statement of chain heads: "these SKUs' chains
// reached these seals". The sealer writes one, numbered N from 1 with no
// gap, each linked to the previous one's MAC, for the heads that moved
// since the last. A head vouches for every seal before it through the
// chain's links, the unkeyed seals of release 1.0.0 included, and a chain
// that no longer reaches a checkpointed head lost its tail.
type Checkpoint struct {
	N       int64
	PrevMAC string
	KeyID   string
	At      time.Time
	// Heads are in SKU order, one per SKU.
	Heads []SealHead
	MAC   string
}

// NewCheckpoint returns the checkpoint after prev (the zero Checkpoint
// before the first) of heads at at, keyed with k.
func NewCheckpoint(k SealKey, prev Checkpoint, at time.Time, heads []SealHead) Checkpoint {
	heads = slices.Clone(heads)
	slices.SortFunc(heads, func(a, b SealHead) int { return cmp.Compare(a.SKU, b.SKU) })
	c := Checkpoint{N: prev.N + 1, PrevMAC: prev.MAC, KeyID: k.ID, At: at.Truncate(time.Microsecond), Heads: heads}
	c.MAC = checkpointMAC(k, c)
	return c
}

// checkpointMAC is HMAC-SHA256 under k over every field of c but MAC,
// each length-prefixed, the heads in SKU order.
func checkpointMAC(k SealKey, c Checkpoint) string {
	h := hmac.New(sha256.New, k.secret)
	for _, f := range []string{"checkpoint", string(SealHMACSHA256), k.ID, strconv.FormatInt(c.N, 10), c.PrevMAC,
		strconv.FormatInt(c.At.UnixMicro(), 10), strconv.Itoa(len(c.Heads))} {
		writeField(h, f)
	}
	heads := slices.Clone(c.Heads)
	slices.SortFunc(heads, func(a, b SealHead) int { return cmp.Compare(a.SKU, b.SKU) })
	for _, hd := range heads {
		writeField(h, hd.SKU)
		writeField(h, strconv.FormatInt(hd.Seq, 10))
		writeField(h, hd.Hash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CheckpointVerifier checks the checkpoints in N order and keeps the
// newest head of each SKU they vouch for.
type CheckpointVerifier struct {
	// Keys checks the checkpoints' MACs.
	Keys SealKeys
	// seen is the last checkpoint given to Check, last the last that
	// verified.
	seen, last Checkpoint
	heads      map[string]VouchedHead
}

// VouchedHead is a SKU's newest head in the checkpoints, and the N of the
// checkpoint that vouches for it.
type VouchedHead struct {
	SealHead
	Checkpoint int64
}

// Check verifies that c follows the previous checkpoint (N+1, linked by
// its MAC), that its MAC is right, and that no head goes back, and returns
// the first that fails. A break is
// ErrCorruptLedger, a key id neither in Keys nor declared retired among
// them (ErrUnknownSealKey) included; under a retired id it returns
// ErrSealKeyRetired, with no key at all ErrSealKeyMissing.
//
// Whatever it returns, the next checkpoint is checked against c, so one
// checkpoint that cannot be checked, or is broken, does not hide the
// later ones; and the heads of c count whenever a key of Keys made its
// MAC, even under an edited key id, since then the sealer wrote them.
func (v *CheckpointVerifier) Check(c Checkpoint) error {
	prev := v.seen
	v.seen = c
	var linkErr error
	if c.N != prev.N+1 {
		linkErr = fmt.Errorf("%w: checkpoint %d follows checkpoint %d: checkpoints %d-%d were deleted", ErrCorruptLedger, c.N, prev.N, prev.N+1, c.N-1)
	} else if c.PrevMAC != prev.MAC {
		linkErr = fmt.Errorf("%w: checkpoint %d does not link to checkpoint %d", ErrCorruptLedger, c.N, prev.N)
	}
	made := func(k SealKey) bool { return hmac.Equal([]byte(checkpointMAC(k, c)), []byte(c.MAC)) }
	k, ok := v.Keys.Lookup(c.KeyID)
	switch {
	case ok && !made(k):
		return cmp.Or(linkErr, fmt.Errorf("%w: checkpoint %d's MAC (key %s) does not match its heads: edited, or written without the key", ErrCorruptLedger, c.N, c.KeyID))
	case !ok:
		k, ok = v.Keys.matching(made)
		if !ok {
			return cmp.Or(linkErr, unknownKeyID(v.Keys, fmt.Sprintf("checkpoint %d", c.N), c.KeyID))
		}
		linkErr = cmp.Or(linkErr, fmt.Errorf("%w: checkpoint %d names key id %q but key %s made it: its key id was edited", ErrCorruptLedger, c.N, c.KeyID, k.ID))
	}
	if v.heads == nil {
		v.heads = map[string]VouchedHead{}
	}
	var headErr error
	for _, hd := range c.Heads {
		if was, ok := v.heads[hd.SKU]; ok && hd.Seq < was.Seq {
			headErr = cmp.Or(headErr, fmt.Errorf("%w: checkpoint %d puts sku %s's head back from seq %d to %d", ErrCorruptLedger, c.N, hd.SKU, was.Seq, hd.Seq))
			continue
		}
		v.heads[hd.SKU] = VouchedHead{SealHead: hd, Checkpoint: c.N}
	}
	if err := cmp.Or(linkErr, headErr); err != nil {
		return err
	}
	v.last = c
	return nil
}

// Last is the last checkpoint that verified (the zero Checkpoint before
// the first); checkpoints after it may have been given to Check.
func (v *CheckpointVerifier) Last() Checkpoint { return v.last }

// Heads are the newest heads that checkpoints a key made vouch for, one
// per SKU, in no order.
func (v *CheckpointVerifier) Heads() []VouchedHead {
	out := make([]VouchedHead, 0, len(v.heads))
	for _, h := range v.heads {
		out = append(out, h)
	}
	return out
}

// CheckpointRef names a checkpoint by its N and its MAC, or the MAC's
// first 16 hex digits or more.
type CheckpointRef struct {
	N   int64
	MAC string
}

// ParseCheckpointRef reads N:MAC, as audit verify prints the newest
// checkpoint.
func ParseCheckpointRef(s string) (CheckpointRef, error) {
	n, mac, ok := strings.Cut(s, ":")
	ref := CheckpointRef{MAC: strings.ToLower(mac)}
	var err error
	if ok && n != "" && strings.Trim(n, "0123456789") == "" {
		ref.N, err = strconv.ParseInt(n, 10, 64)
	}
	if !ok || err != nil || ref.N < 1 || len(ref.MAC) < 16 || len(ref.MAC) > 64 || strings.Trim(ref.MAC, "0123456789abcdef") != "" {
		return CheckpointRef{}, NewFieldError("--since-checkpoint",
			errors.New("must be N:MAC, a checkpoint's number and at least the first 16 hex digits of its MAC, as audit verify prints them"))
	}
	return ref, nil
}
