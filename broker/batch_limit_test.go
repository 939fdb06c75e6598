package broker

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// A SEND_BATCH whose encoded body exceeds the store's MaxMessageSize is
// refused whole with MESSAGE_ILLEGAL and RocketMQ's remark, though each of
// its items is well under the limit; nothing of it is stored, and a batch
// at the limit is.
func TestBrokerBatchOverMaxMessageSizeRefused(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	max := b.Store().Options().MaxMessageSize
	c := newTestClient(t, b.Addr())
	item := bytes.Repeat([]byte("b"), max/4)
	encode := func(n int, last int) []byte {
		var body []byte
		for i := 0; i < n; i++ {
			it := item
			if i == n-1 {
				it = item[:last]
			}
			body = record.AppendBatchItem(body, 0, it, props(record.PropertyUniqueClientMessageIDKeyIndex, "U"+strconv.Itoa(i)))
		}
		return body
	}
	send := func(body []byte) *protocol.Command {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "BatchLimit", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 1,
			QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true}
		return c.invoke(protocol.SendBatchMessage, h.V2(), body)
	}
	// Four items of max/4 bytes: their bodies alone fill the limit, the
	// items' headers push the batch over it.
	over := encode(4, len(item))
	if len(over) <= max {
		t.Fatalf("test batch of %d bytes is not over %d", len(over), max)
	}
	resp := send(over)
	want := "msg body length limit " + strconv.Itoa(max) + "B"
	if resp.Code != protocol.MessageIllegal || !strings.Contains(resp.Remark, want) || !strings.Contains(resp.Remark, strconv.Itoa(len(over))) {
		t.Fatalf("batch of %d bytes: code %d %q, want %d with %q", len(over), resp.Code, resp.Remark, protocol.MessageIllegal, want)
	}
	// Exactly max bytes: the last item shrunk by what the batch exceeded.
	at := encode(4, len(item)-(len(over)-max))
	if len(at) != max {
		t.Fatalf("test batch of %d bytes, want %d", len(at), max)
	}
	if resp := send(at); resp.Code != protocol.Success {
		t.Fatalf("batch of %d bytes (the limit): code %d %q", len(at), resp.Code, resp.Remark)
	}
	waitDispatched(t, b, "BatchLimit", 0, 4)
	if n := b.Store().MaxOffset("BatchLimit", 0); n != 4 {
		t.Fatalf("queue holds %d messages, want the 4 of the accepted batch", n)
	}
}
