package projections

import (
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/invledger/invledger/projections/streamentry"
)

// nodeRunsKey is the metadata key holding the node runs an entry was read
// under.
const nodeRunsKey = "_redis_node_runs"

// entryUnmarshaller turns a stream entry into a Watermill message whose
// metadata holds the entry's raw fields, and the node runs current when it
// was read: redisbatch unmarshals a read's entries as the read answers,
// before delivering any, so this is read time, not handle time. It never
// fails: parsing is left to the handler, which sends malformed entries to
// dead_letters (an entry the Unmarshaller refused would stay pending).
// redisbatch adds the stream id under streamentry.StreamIDField.
type entryUnmarshaller struct {
	nodeRuns *atomic.Pointer[string]
}

func (u entryUnmarshaller) Unmarshal(values map[string]any) (*message.Message, error) {
	md := message.Metadata(streamentry.EntryFields(values))
	if e := u.nodeRuns.Load(); e != nil {
		md[nodeRunsKey] = *e
	}
	id := md["event_id"]
	if id == "" {
		id = watermill.NewUUID()
	}
	msg := message.NewMessage(id, nil)
	msg.Metadata = md
	return msg, nil
}
