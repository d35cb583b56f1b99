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
	Keys  SealKeys
	last  Checkpoint
	heads map[string]SealHead
}

// Check verifies that c follows the previous checkpoint (N+1, linked by
// its MAC), that its MAC is right, and that no head goes back. A break is
// ErrCorruptLedger; a key id not in Keys is ErrSealKeyMissing.
func (v *CheckpointVerifier) Check(c Checkpoint) error {
	if c.N != v.last.N+1 {
		return fmt.Errorf("%w: checkpoint %d follows checkpoint %d: checkpoints %d-%d were deleted", ErrCorruptLedger, c.N, v.last.N, v.last.N+1, c.N-1)
	}
	if c.PrevMAC != v.last.MAC {
		return fmt.Errorf("%w: checkpoint %d does not link to checkpoint %d", ErrCorruptLedger, c.N, v.last.N)
	}
	k, ok := v.Keys.Lookup(c.KeyID)
	if !ok {
		return fmt.Errorf("%w: checkpoint %d is keyed with key id %q", ErrSealKeyMissing, c.N, c.KeyID)
	}
	if !hmac.Equal([]byte(checkpointMAC(k, c)), []byte(c.MAC)) {
		return fmt.Errorf("%w: checkpoint %d's MAC (key %s) does not match its heads: edited, or written without the key", ErrCorruptLedger, c.N, c.KeyID)
	}
	if v.heads == nil {
		v.heads = map[string]SealHead{}
	}
	for _, hd := range c.Heads {
		if was, ok := v.heads[hd.SKU]; ok && hd.Seq < was.Seq {
			return fmt.Errorf("%w: checkpoint %d puts sku %s's head back from seq %d to %d", ErrCorruptLedger, c.N, hd.SKU, was.Seq, hd.Seq)
		}
		v.heads[hd.SKU] = hd
	}
	v.last = c
	return nil
}

// Last is the last checkpoint that verified (the zero Checkpoint before
// the first).
func (v *CheckpointVerifier) Last() Checkpoint { return v.last }

// Head is the newest head of sku the verified checkpoints vouch for.
func (v *CheckpointVerifier) Head(sku string) (SealHead, bool) {
	h, ok := v.heads[sku]
	return h, ok
}

// Heads are the newest vouched heads, one per SKU, in no order.
func (v *CheckpointVerifier) Heads() []SealHead {
	out := make([]SealHead, 0, len(v.heads))
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
