package broker

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerResendNotStoredTwice: a send marked as a resend whose UNIQ_KEY
// the topic already holds is answered with the stored message; without
// the mark, or with another key, it is stored.
func TestBrokerResendNotStoredTwice(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tc := newTestClient(t, b.Addr())
	p := props(record.PropertyUniqueClientMessageIDKeyIndex, "0A0000010000ABCD0000000000000001")
	first := tc.mustSend("Resend", 0, "once", p)
	resend := func(properties string) *protocol.Command {
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Resend", DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, BornTimestamp: time.Now().UnixMilli(), Properties: properties}
		req := protocol.NewRequest(protocol.SendMessageV2, h.V2(), []byte("once"))
		req.ExtFields[protocol.SendResendField] = "true"
		ctx, cancel := contextTimeout(10 * time.Second)
		defer cancel()
		resp, err := tc.c.Invoke(ctx, tc.addr, req)
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("resend: %v %v", resp, err)
		}
		return resp
	}
	var again protocol.SendMessageResponseHeader
	if err := resend(p).DecodeHeader(&again); err != nil {
		t.Fatal(err)
	}
	if again.MsgID != first.MsgID || again.QueueOffset != first.QueueOffset || again.QueueID != 0 {
		t.Fatalf("resend answered %+v, first send %+v", again, first)
	}
	resend(props(record.PropertyUniqueClientMessageIDKeyIndex, "0A0000010000ABCD0000000000000002"))
	tc.mustSend("Resend", 0, "twice", p) // not marked: stored again
	waitDispatched(t, b, "Resend", 0, 3)
	time.Sleep(50 * time.Millisecond)
	if n := b.Store().MaxOffset("Resend", 0); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
}
