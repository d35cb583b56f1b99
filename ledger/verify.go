package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/invledger/invledger/domain"
)

// SealedRow is one seq of a SKU's chain: its ledger row and its seal, either
// of which may be missing (a row not sealed yet, or a sealed row that was
// deleted).
type SealedRow struct {
	SKU   string
	Seq   int64
	Event *domain.Event
	Seal  *domain.Seal
}

// ChainScanner reads the ledger's rows beside their seals, and the keyed
// checkpoints of the chain heads.
type ChainScanner interface {
	// ScanChain calls fn for every seq that has a row or a seal, of sku or
	// of every SKU when sku is "", grouped by SKU and in seq order.
	ScanChain(ctx context.Context, sku string, fn func(SealedRow) error) error
	// ScanCheckpoints calls fn for every checkpoint, with its heads, in N
	// order.
	ScanCheckpoints(ctx context.Context, fn func(domain.Checkpoint) error) error
}

// VerifyOptions say what VerifyChains checks, and with which keys.
type VerifyOptions struct {
	// SKU, if set, limits the chains checked to this one SKU's; the
	// checkpoints are always checked in full.
	SKU string
	// Keys check the keyed seals and the checkpoints; the key ids they
	// declare retired are reported as not checked, any other key id
	// without a key as broken.
	Keys domain.SealKeys
	// Since, if set, is a checkpoint recorded earlier, outside the
	// database (as verify printed it): verify reports the checkpoints
	// broken unless the ledger still holds it, so a rollback of the rows,
	// seals and checkpoints written after it shows.
	Since *domain.CheckpointRef
	// Progress, if set, is called every 100,000 rows.
	Progress func(events int64)
}

// ChainReport is the outcome of verifying the tamper-evident chains.
type ChainReport struct {
	SKUs   int
	Events int64
	// Sealed counts the rows whose seal verified: Keyed of them with an
	// HMAC (KeyIDs counts them by key id), Unkeyed with release 1.0.0's
	// sha256.
	Sealed  int64
	Keyed   int64
	KeyIDs  map[string]int64
	Unkeyed int64
	// Checkpoints counts the keyed checkpoints that verified; Newest is
	// the last of them (zero N when none), and Latest the N of the last
	// checkpoint in the ledger, verified or not.
	Checkpoints int64
	Newest      domain.Checkpoint
	Latest      int64
	// Retired counts, by key id, the rows whose seal is under a key
	// declared retired, and RetiredCheckpoints the checkpoints: their
	// links were checked, their MACs cannot be.
	Retired            map[string]int64
	RetiredCheckpoints int64
	// UnknownKeyIDs are the key ids of broken seals and checkpoints that
	// name neither a given key nor a retired one.
	UnknownKeyIDs []string
	// KeyedLedger says the ledger holds keyed checkpoints: every seal must
	// then be keyed, or vouched for by a checkpoint (those sealed before
	// the ledger was keyed).
	KeyedLedger bool
	// KeysGiven are the ids of the keys verify was given.
	KeysGiven []string
	Broken    []BrokenChain
	// BrokenCheckpoint is the first checkpoint that does not verify.
	BrokenCheckpoint string
	// Rollback says the checkpoint of VerifyOptions.Since is gone or
	// differs: the ledger was rolled back past it.
	Rollback string
	// Unsealed lists the SKUs with rows the sealer has not linked yet.
	Unsealed []UnsealedChain
	// Unchecked lists what verify could not check for want of a key.
	Unchecked []string
}

// BrokenChain names the first row of a SKU whose chain does not hold: the
// row that was edited, deleted or inserted out of order, or the first one
// after a removed link.
type BrokenChain struct {
	SKU    string
	Seq    int64
	Reason string
}

// UnsealedChain is a SKU whose rows after SealedTo wait for the sealer.
// When Missing is set, the seq after SealedTo is not in the ledger: the
// seal waits for it (an event still in flight), or stops there for good
// (an event Redis lost, which reconciliation reports).
type UnsealedChain struct {
	SKU      string
	SealedTo int64
	Rows     int64
	Missing  bool
}

// String says where the SKU's seal stands.
func (u UnsealedChain) String() string {
	if u.Missing {
		return fmt.Sprintf("%s: sealed to seq %d; seq %d is not in the ledger, %d later rows wait for it", u.SKU, u.SealedTo, u.SealedTo+1, u.Rows)
	}
	return fmt.Sprintf("%s: sealed to seq %d; %d rows wait for the sealer", u.SKU, u.SealedTo, u.Rows)
}

// ErrCannotVerify means verify could not check what it was asked to: keyed
// seals or checkpoints while it was given no key at all, or a key but no
// checkpoint to check the ledger against. (Given keys, a key id it does
// not hold is broken unless declared retired.)
var ErrCannotVerify = errors.New("cannot verify the ledger's seals")

// Intact says whether nothing verify checked is broken.
func (r ChainReport) Intact() bool {
	return len(r.Broken) == 0 && r.BrokenCheckpoint == "" && r.Rollback == ""
}

// Reference is the checkpoint to keep outside the database for a later
// verify's Since: the newest that verified, offered only when the ledger
// is intact and no later checkpoint went unchecked, since a reference
// older than a checkpoint verify could not check would let a rollback to
// that checkpoint pass.
func (r ChainReport) Reference() (domain.Checkpoint, bool) {
	return r.Newest, r.Newest.N > 0 && r.Newest.N == r.Latest && r.Intact() && len(r.Unchecked) == 0
}

// CannotVerify returns ErrCannotVerify, saying what is missing, when the
// report leaves part of the ledger unchecked.
func (r ChainReport) CannotVerify() error {
	switch {
	case len(r.Unchecked) > 0:
		given := "no key"
		if len(r.KeysGiven) > 0 {
			given = "keys " + strings.Join(r.KeysGiven, ", ")
		}
		return fmt.Errorf("%w: %s; verify was given %s. Give it the service's seal keys, old ones included (--seal-keys, INVLEDGER_SEAL_KEYS)",
			ErrCannotVerify, strings.Join(r.Unchecked, "; "), given)
	case len(r.KeysGiven) > 0 && !r.KeyedLedger && r.Sealed > 0:
		return fmt.Errorf("%w: it was given seal keys, but the ledger holds no keyed checkpoint: it was never sealed with a key, or its checkpoints were deleted. Run serve with the same --seal-keys (its sealer checkpoints at its first pass) and verify again", ErrCannotVerify)
	}
	return nil
}

// noteUnknownKey records keyID when err is a seal or checkpoint under a key
// id neither given nor retired, so the report can say what to do if it is
// an honest key verify was not given.
func (r *ChainReport) noteUnknownKey(err error, keyID string) {
	if errors.Is(err, domain.ErrUnknownSealKey) && !slices.Contains(r.UnknownKeyIDs, keyID) {
		r.UnknownKeyIDs = append(r.UnknownKeyIDs, keyID)
	}
}

// Unprotected says the chains resist no one who can write the database:
// nothing in them is keyed.
func (r ChainReport) Unprotected() bool { return !r.KeyedLedger && r.Keyed == 0 }

// VerifyChains recomputes every SKU's seals (or only opt.SKU's) from the
// ledger, link by link in seq order, checks the keyed checkpoints, and
// reports the first broken seq of each SKU and the rows not sealed yet.
// Both tables refuse UPDATE and DELETE, so a break means someone went
// around the database's own guard, e.g. as a superuser with triggers off.
// A keyed seal can only be made with the key, so an edit of a keyed row is
// named by its seq even when its seal and the later ones were recomputed
// with the public formula; an unkeyed row sealed before the ledger was
// keyed is vouched for by the checkpoint of its chain's head, and an edit
// of it is named at that head. A chain that ends before its checkpointed
// head lost its tail. A row not sealed yet is reported as such: nothing
// vouches for it until the sealer links it.
//
// A key id is written by whoever writes the database, so one that names
// no given key is not a reason to stop checking: it is broken, unless
// opt.Keys declare it retired, when the rows and checkpoints under it are
// counted as not checked and everything around them is still checked
// (their links, later keyed seals and checkpoints, the heads of every
// checkpoint a key made, and opt.Since).
func VerifyChains(ctx context.Context, chains ChainScanner, opt VerifyOptions) (ChainReport, error) {
	if opt.SKU != "" {
		if _, err := domain.NewSKUID(opt.SKU); err != nil {
			return ChainReport{}, err
		}
	}
	rep := ChainReport{KeyIDs: map[string]int64{}, Retired: map[string]int64{}, KeysGiven: opt.Keys.IDs()}
	checkpoints := domain.CheckpointVerifier{Keys: opt.Keys}
	var (
		missing    bool // no key at all for a keyed checkpoint
		sinceFound bool
		sinceMAC   string
	)
	err := chains.ScanCheckpoints(ctx, func(c domain.Checkpoint) error {
		rep.KeyedLedger, rep.Latest = true, c.N
		if opt.Since != nil && c.N == opt.Since.N {
			sinceFound, sinceMAC = true, c.MAC
		}
		err := checkpoints.Check(c)
		switch {
		case err == nil:
			rep.Checkpoints++
		case errors.Is(err, domain.ErrSealKeyRetired):
			rep.RetiredCheckpoints++
		case errors.Is(err, domain.ErrSealKeyMissing):
			if !missing {
				missing = true
				rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("checkpoints from %d on: %v", c.N, err))
			}
		case errors.Is(err, domain.ErrCorruptLedger):
			rep.noteUnknownKey(err, c.KeyID)
			if rep.BrokenCheckpoint == "" {
				rep.BrokenCheckpoint = err.Error()
			}
		default:
			return err
		}
		return nil
	})
	if err != nil {
		return ChainReport{}, err
	}
	// The heads of every checkpoint a key made, not only of those before
	// the first one that failed: a tail cut shows whatever hides a
	// checkpoint.
	heads := map[string]domain.VouchedHead{}
	for _, h := range checkpoints.Heads() {
		heads[h.SKU] = h
	}
	rep.Newest = checkpoints.Last()
	if since := opt.Since; since != nil {
		if !sinceFound {
			rep.Rollback = fmt.Sprintf("checkpoint %d, recorded earlier, is gone (the newest is %d): the rows, seals and checkpoints written since were deleted, or the database was rolled back",
				since.N, rep.Latest)
		} else if !strings.HasPrefix(sinceMAC, since.MAC) {
			rep.Rollback = fmt.Sprintf("checkpoint %d is not the one recorded earlier (its MAC starts %s, not %s): the checkpoints were rewritten",
				since.N, sinceMAC[:min(len(sinceMAC), 16)], since.MAC[:16])
		}
	}

	var (
		current  string
		verifier domain.ChainVerifier
		done     bool // the SKU is broken or cannot be checked further
		sealedTo int64
		pending  *UnsealedChain
		head     domain.VouchedHead
		hasHead  bool
		// unkeyedFrom is the first seq of the SKU's trailing run of
		// unkeyed seals that neither a keyed seal nor a checkpoint vouches
		// for; 0 when there is none.
		unkeyedFrom int64
		seen        = map[string]bool{}
	)
	breakAt := func(seq int64, reason string) {
		done = true
		rep.Broken = append(rep.Broken, BrokenChain{SKU: current, Seq: seq, Reason: reason})
	}
	endSKU := func() {
		if current == "" {
			return
		}
		if !done && hasHead && sealedTo < head.Seq {
			breakAt(sealedTo+1, fmt.Sprintf("sku %s's chain ends at seq %d, but checkpoint %d vouches for it up to seq %d: rows %d-%d, or their seals, were deleted from the tail",
				current, sealedTo, head.Checkpoint, head.Seq, sealedTo+1, head.Seq))
		}
		if !done && rep.KeyedLedger && unkeyedFrom > 0 {
			breakAt(unkeyedFrom, fmt.Sprintf("sku %s seq %d on are sealed unkeyed (sha256) in a keyed ledger, and no checkpoint vouches for them: re-sealed with the public formula, or sealed by a serve without the seal key",
				current, unkeyedFrom))
		}
		if pending != nil && !done {
			rep.Unsealed = append(rep.Unsealed, *pending)
		}
		pending = nil
	}
	check := func(r SealedRow) error {
		if r.SKU != current {
			endSKU()
			current, verifier, done, sealedTo, unkeyedFrom = r.SKU, domain.ChainVerifier{Keys: opt.Keys}, false, 0, 0
			head, hasHead = heads[r.SKU]
			seen[r.SKU] = true
			rep.SKUs++
		}
		if r.Event != nil {
			rep.Events++
			if opt.Progress != nil && rep.Events%100_000 == 0 {
				opt.Progress(rep.Events)
			}
		}
		if done {
			return nil
		}
		switch {
		case r.Event == nil:
			breakAt(r.Seq, fmt.Sprintf("sku %s seq %d is sealed but its row is gone from the ledger: deleted", r.SKU, r.Seq))
		case r.Seal == nil:
			if pending == nil {
				pending = &UnsealedChain{SKU: r.SKU, SealedTo: sealedTo, Missing: r.Seq != sealedTo+1}
			}
			pending.Rows++
		case pending != nil:
			breakAt(pending.SealedTo+1, fmt.Sprintf("sku %s seq %d is sealed but rows before it are not: a row inserted out of order, or a seal removed", r.SKU, r.Seq))
		default:
			err := verifier.Check(*r.Event, *r.Seal)
			retired := errors.Is(err, domain.ErrSealKeyRetired)
			switch {
			case err == nil, retired:
			case errors.Is(err, domain.ErrCorruptLedger):
				rep.noteUnknownKey(err, r.Seal.KeyID)
				breakAt(r.Seq, err.Error())
				return nil
			case errors.Is(err, domain.ErrSealKeyMissing):
				done = true
				rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("sku %s from seq %d on: %v", r.SKU, r.Seq, err))
				return nil
			default:
				return err
			}
			if hasHead && r.Seq == head.Seq && r.Seal.Hash != head.Hash {
				breakAt(r.Seq, fmt.Sprintf("sku %s's seal at seq %d is not the head checkpoint %d vouches for: a row at or before seq %d was edited and the unkeyed seals re-computed, or the seals replaced",
					r.SKU, r.Seq, head.Checkpoint, r.Seq))
				return nil
			}
			sealedTo = r.Seq
			switch {
			case retired:
				// Its link held; its own MAC cannot be checked.
				rep.Retired[r.Seal.KeyID]++
				unkeyedFrom = 0
			case r.Seal.Algorithm == domain.SealHMACSHA256:
				rep.Sealed++
				rep.Keyed++
				rep.KeyIDs[r.Seal.KeyID]++
				unkeyedFrom = 0
			default:
				rep.Sealed++
				rep.Unkeyed++
				if unkeyedFrom == 0 && (!hasHead || r.Seq > head.Seq) {
					unkeyedFrom = r.Seq
				}
			}
			if hasHead && r.Seq == head.Seq {
				unkeyedFrom = 0
			}
		}
		return nil
	}
	if err := chains.ScanChain(ctx, opt.SKU, check); err != nil {
		return ChainReport{}, err
	}
	endSKU()
	// A SKU the checkpoints vouch for that has no row and no seal left.
	gone := make([]string, 0)
	for sku := range heads {
		if !seen[sku] && (opt.SKU == "" || opt.SKU == sku) {
			gone = append(gone, sku)
		}
	}
	slices.Sort(gone)
	for _, sku := range gone {
		h := heads[sku]
		rep.Broken = append(rep.Broken, BrokenChain{SKU: sku, Seq: 1, Reason: fmt.Sprintf(
			"sku %s has no row and no seal left, but checkpoint %d vouches for its chain up to seq %d: deleted", sku, h.Checkpoint, h.Seq)})
	}
	if rep.Broken == nil {
		rep.Broken = []BrokenChain{}
	}
	return rep, nil
}
