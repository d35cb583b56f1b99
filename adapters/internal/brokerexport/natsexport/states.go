package natsexport

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
)

// maxLastFor is the most subjects one direct get answers the last
// messages of.
const maxLastFor = 1024

// readStates reads what the stream holds of every SKU of runs not known,
// the last messages of up to 1,024 subjects per request where the stream
// answers direct gets; fresh reports that every SKU was read now. A SKU
// whose subject holds a message the export did not publish gets its
// error in out.
func (p *Publisher) readStates(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream,
	runs []brokerexport.Run, out []brokerexport.Outcome) (fresh bool, _ error) {
	bySubject := map[string]int{}
	var subjects []string
	for i, r := range runs {
		if _, ok := p.get(r.SKU); ok {
			continue
		}
		subject := p.Subject(r.SKU)
		bySubject[subject] = i
		subjects = append(subjects, subject)
	}
	fresh = len(subjects) == len(runs)
	if len(subjects) == 0 {
		return fresh, nil
	}
	found := map[string]bool{}
	record := func(raw *jetstream.RawStreamMsg) {
		i, ok := bySubject[raw.Subject]
		if !ok {
			return
		}
		found[raw.Subject] = true
		if st, err := p.stateOf(raw); err != nil {
			out[i].Err = err
		} else {
			p.set(runs[i].SKU, st, true)
		}
	}
	if !p.directReads() {
		for _, subject := range subjects {
			st, err := p.last(ctx, stream, subject)
			if err != nil && !errors.Is(err, brokerexport.ErrConflict) {
				return false, err
			}
			found[subject] = true
			if err != nil {
				out[bySubject[subject]].Err = err
			} else {
				p.set(runs[bySubject[subject]].SKU, st, true)
			}
		}
		return fresh, nil
	}
	for chunk := range slices.Chunk(subjects, maxLastFor) {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		msgs, err := jetstreamext.GetLastMsgsFor(rctx, js, p.cfg.Stream, chunk)
		if err == nil {
			for raw, rerr := range msgs {
				if rerr != nil {
					err = rerr
					break
				}
				record(raw)
			}
		}
		cancel()
		if err != nil && !errors.Is(err, jetstreamext.ErrNoMessages) {
			return false, p.explain(fmt.Errorf("read the last messages of %d subjects: %w", len(chunk), err))
		}
	}
	for _, subject := range subjects {
		if !found[subject] {
			p.set(runs[bySubject[subject]].SKU, state{}, true) // nothing published yet
		}
	}
	return fresh, nil
}

func (p *Publisher) directReads() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.direct
}

// unpublished are runs' outcomes before anything is published: each at
// its After.
func unpublished(runs []brokerexport.Run) []brokerexport.Outcome {
	out := make([]brokerexport.Outcome, len(runs))
	for i, r := range runs {
		out[i].UpTo = r.After
	}
	return out
}

func failAll(out []brokerexport.Outcome, err error) []brokerexport.Outcome {
	for i := range out {
		if out[i].Err == nil {
			out[i].Err = err
		}
	}
	return out
}
