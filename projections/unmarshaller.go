package projections

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/invledger/invledger/adapters/redisinventory"
)

// entryUnmarshaller turns a stream entry into a Watermill message whose
// metadata holds the entry's raw fields. It never fails: an error from an
// Unmarshaller kills the redisstream consumer, so parsing is left to the
// handler, which sends malformed entries to dead_letters.
type entryUnmarshaller struct{}

func (entryUnmarshaller) Unmarshal(values map[string]any) (*message.Message, error) {
	md := message.Metadata(redisinventory.EntryFields(values))
	id := md["event_id"]
	if id == "" {
		id = md[redisinventory.StreamIDField]
	}
	if id == "" {
		id = watermill.NewUUID()
	}
	msg := message.NewMessage(id, nil)
	msg.Metadata = md
	return msg, nil
}
