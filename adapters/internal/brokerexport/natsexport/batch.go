package natsexport

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
)

// The atomic batch path. A batch holds the next messages of several SKUs;
// each SKU's first message expects the subject's last stream sequence,
// every message carries its event id as Nats-Msg-Id, and the server
// stores all of the batch or none of it. It refuses a whole batch for one
// SKU's wrong expectation and for one message id it already holds (it
// does not acknowledge such a message as a duplicate, as it does outside
// a batch), so after a refusal or a lost answer the batch's SKUs are read
// again, never sent again blindly.

// publishBatch publishes runs as one atomic batch.
func (p *Publisher) publishBatch(ctx context.Context, runs []brokerexport.Run) []brokerexport.Outcome {
	out := unpublished(runs)
	js, stream, err := p.conn()
	if err != nil {
		return failAll(out, err)
	}
	fresh, err := p.readStates(ctx, js, stream, runs, out)
	if err != nil {
		return failAll(out, err)
	}
	var (
		msgs []*nats.Msg
		last = make([]int, len(runs)) // index in msgs of each run's last message, -1: none
	)
	for i, r := range runs {
		last[i] = -1
		if out[i].Err != nil {
			continue
		}
		st, _ := p.get(r.SKU)
		out[i].UpTo = max(r.After, st.ledgerSeq)
		subject := p.Subject(r.SKU)
		for _, m := range r.Msgs {
			if m.Seq <= st.ledgerSeq {
				continue
			}
			msg := p.msg(subject, m)
			if last[i] < 0 {
				msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(st.streamSeq, 10))
			}
			msgs = append(msgs, msg)
			last[i] = len(msgs) - 1
		}
	}
	if len(msgs) == 0 {
		return out
	}
	pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	ack, err := jetstreamext.PublishMsgBatch(pctx, js, msgs)
	cancel()
	if err == nil {
		// The server stores a batch's messages one after another.
		first := ack.Sequence - uint64(len(msgs)) + 1
		for i, r := range runs {
			if last[i] < 0 {
				continue
			}
			seq := r.Msgs[len(r.Msgs)-1].Seq
			p.set(r.SKU, state{streamSeq: first + uint64(last[i]), ledgerSeq: seq}, true)
			out[i].UpTo = seq
		}
		return out
	}
	for _, r := range runs {
		p.set(r.SKU, state{}, false) // the batch may be stored although its answer was lost
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstreamext.JSErrCodeBatchPublishNotEnabled {
		// allow_atomic was turned off since Connect: the next connect
		// chooses the path again.
		p.cfg.Logger.Warn("nats export: the stream no longer takes atomic batches; reconnecting to choose the path again", "stream", p.cfg.Stream)
		p.mu.Lock()
		p.atomic = false
		p.mu.Unlock()
	}
	if !refusedForOrder(err) || !fresh {
		return failAll(out, p.explain(err))
	}
	// Refused although every SKU was read just before: another writer is
	// publishing to some subject. Each SKU alone tells which.
	if len(runs) > 1 {
		for i, r := range runs {
			if out[i].Err == nil {
				out[i] = p.publishBatch(ctx, []brokerexport.Run{r})[0]
			}
		}
		return out
	}
	out[0].Err = fmt.Errorf("%w: stream %q refused %s's next events right after reading its subject: %w",
		brokerexport.ErrConflict, p.cfg.Stream, runs[0].SKU, err)
	return out
}

// refusedForOrder reports a batch refused for a wrong expected subject
// sequence or a message id the stream already holds.
func refusedForOrder(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstreamext.JSErrCodeBatchPublishDuplicateMsgID)
}
