package natsexport

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
)

// The predicted-sequence pipeline, for a server without atomic batches and
// a stream of one replica. A batch's messages are sent without waiting,
// one batch at a time: the server stores one connection's messages to a
// single-replica stream in the order sent, so each message's stream
// sequence is predicted: the stream's last one plus its place in the
// batch. Each message expects both the stream's last sequence to be the
// one predicted before it (Nats-Expected-Last-Sequence) and its subject's
// last to be its SKU's previous message (Nats-Expected-Last-Subject-
// Sequence, the predicted one within the batch). The stream's expectation
// is what keeps a SKU's order: with it, a message is stored only at its
// predicted sequence, so once a message is refused (another writer
// published meanwhile) every later one is refused too. The subject's
// alone would not do: after a refusal shifts the stream by one, a SKU's
// message expecting its refused predecessor's predicted sequence meets the
// sequence the message before that was stored at, and would be stored
// past the gap. After a refusal the batch's SKUs and the stream's last
// sequence are read again. A replicated stream's leader refuses a second
// conditional publish to a subject while one is in flight, so there the
// per-SKU path runs.

// pipelineBatch is the most messages a pipelined batch holds, within the
// client's default of 4,000 publishes awaiting their acknowledgement.
const pipelineBatch = 2000

// publishPipeline publishes runs as one pipelined batch.
func (p *Publisher) publishPipeline(ctx context.Context, runs []brokerexport.Run) []brokerexport.Outcome {
	out := unpublished(runs)
	js, stream, err := p.conn()
	if err != nil {
		return failAll(out, err)
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if p.streamLast == 0 {
		info, err := stream.Info(ctx)
		if err != nil {
			return failAll(out, p.explain(fmt.Errorf("read stream %q: %w", p.cfg.Stream, err)))
		}
		p.streamLast = info.State.LastSeq + 1 // held as one more, so that an empty stream is known
	}
	type sent struct {
		run       int
		seq       int64
		predicted uint64
		ack       jetstream.PubAckFuture
	}
	var (
		all    []sent
		next   = p.streamLast - 1
		broken error
	)
	if _, err := p.readStates(ctx, js, stream, runs, out); err != nil {
		return failAll(out, err)
	}
send:
	for i, r := range runs {
		if out[i].Err != nil {
			continue
		}
		st, _ := p.get(r.SKU)
		out[i].UpTo = max(r.After, st.ledgerSeq)
		expect := st.streamSeq
		for _, m := range r.Msgs {
			if m.Seq <= st.ledgerSeq {
				continue
			}
			ack, err := js.PublishMsgAsync(p.msg(p.Subject(r.SKU), m),
				jetstream.WithExpectLastSequence(next), jetstream.WithExpectLastSequencePerSubject(expect))
			if err != nil {
				broken = p.explain(err)
				break send
			}
			next++
			all = append(all, sent{run: i, seq: m.Seq, predicted: next, ack: ack})
			expect = next
		}
	}
	for k, s := range all {
		sku := runs[s.run].SKU
		select {
		case ack := <-s.ack.Ok():
			if out[s.run].Err != nil {
				continue
			}
			if ack.Duplicate || ack.Sequence != s.predicted {
				// Stored before, or at another place: the predictions after it are off.
				broken = fmt.Errorf("nats export: stream %q stored %s seq %d at %d, not at %d as predicted", p.cfg.Stream, sku, s.seq, ack.Sequence, s.predicted)
			}
			p.set(sku, state{streamSeq: ack.Sequence, ledgerSeq: s.seq}, true)
			out[s.run].UpTo = s.seq
		case err := <-s.ack.Err():
			if out[s.run].Err == nil {
				out[s.run].Err = p.explain(err)
			}
			broken = out[s.run].Err
		case <-ctx.Done():
			broken = fmt.Errorf("nats export: %d publishes unanswered within %s", len(all)-k, p.cfg.Timeout)
			for _, rest := range all[k:] {
				if out[rest.run].Err == nil {
					out[rest.run].Err = broken
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if broken == nil {
		p.streamLast = next + 1
		return out
	}
	// Read the stream and the batch's SKUs again before the next batch.
	p.streamLast = 0
	for i, r := range runs {
		p.set(r.SKU, state{}, false)
		if out[i].Err == nil && out[i].UpTo < r.Msgs[len(r.Msgs)-1].Seq {
			out[i].Err = broken
		}
	}
	return out
}
