package broker

import (
	"math"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// resendWindow bounds how far back in store time a resent message is
// looked for: a producer resends within its send timeout.
const resendWindow = 10 * time.Minute

// findResent serves a send the producer marked as a retry after an
// attempt with an unknown outcome (protocol.SendResendField): when this
// broker's log already holds a message of the topic with the same
// UNIQ_KEY (the earlier attempt stored it here, or on the old master that
// replicated it before a failover), it returns that message's response
// header and log end, so that the send is answered with it, once it is
// acknowledged as a new one would be, instead of storing it twice. It
// returns nil to store m as usual. Batches are not looked up. It may wait
// (for the index), so it runs off the connection's reader.
func (b *Broker) findResent(m *record.Message) (*protocol.SendMessageResponseHeader, int64) {
	uniq, ok := record.LookupPropertyString(m.Properties, record.PropertyUniqueClientMessageIDKeyIndex)
	if !ok || uniq == "" {
		return nil, 0
	}
	// The earlier attempt's record must be in the index: wait for it to
	// cover the log (briefly: a record past the dispatch limit is not
	// indexed until the sync state set has it).
	b.store.WaitIndexed(b.store.MaxPhysicalOffset(), time.Second)
	from := m.BornTimestamp - resendWindow.Milliseconds()
	r, err := b.store.QueryByKey(m.Topic, uniq, 1, from, math.MaxInt64)
	if err != nil || r == nil {
		return nil, 0
	}
	defer r.Release()
	if len(r.Buffers) == 0 {
		return nil, 0
	}
	prev, _, err := record.Decode(r.Buffers[0], false)
	if err != nil {
		return nil, 0
	}
	if v, _ := record.LookupPropertyString(prev.Properties, record.PropertyUniqueClientMessageIDKeyIndex); v != uniq {
		return nil, 0
	}
	phy := r.PhysicalOffsets[0]
	b.plog.Info("resent message found in the log; answered without storing it again", "topic", m.Topic, "uniqKey", uniq, "offset", phy)
	return &protocol.SendMessageResponseHeader{
		MsgID: record.OffsetMessageID(prev.StoreHost, phy), QueueID: prev.QueueID, QueueOffset: prev.QueueOffset,
		Region: "DefaultRegion", TraceOn: true,
	}, phy + int64(len(r.Buffers[0]))
}
