package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerSendAnswersNameTheirOwnMessages: sends pipelined on several
// connections at once, each answered from a recycled pendingSend at the
// end of its reader's batch (or by another connection's reader), are each
// answered once with the msgId and queue offset of their own message. A
// pendingSend reused while its answer was still being built or written
// would name another send's message.
func TestBrokerSendAnswersNameTheirOwnMessages(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	const conns, per, window = 4, 400, 64
	type answer struct {
		body string
		hdr  protocol.SendMessageResponseHeader
	}
	answers := make([][]answer, conns)
	var wg sync.WaitGroup
	for ci := range conns {
		c, err := remoting.NewClient(remoting.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			slots := make(chan struct{}, window)
			var inflight sync.WaitGroup
			for i := range per {
				body := fmt.Sprintf("conn %d message %d", ci, i)
				h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Recycled", DefaultTopic: AutoCreateTopicKey,
					DefaultTopicQueueNums: 4, QueueID: int32(ci), BornTimestamp: time.Now().UnixMilli(), Properties: props("KEYS", body)}
				slots <- struct{}{}
				inflight.Add(1)
				err := c.InvokeAsync(context.Background(), b.Addr(), protocol.NewRequest(protocol.SendMessageV2, h.V2(), []byte(body)), 30*time.Second,
					func(resp *protocol.Command, err error) {
						defer func() { <-slots; inflight.Done() }()
						if err != nil || resp.Code != protocol.Success {
							t.Errorf("send %q: %v %v", body, resp, err)
							return
						}
						var rh protocol.SendMessageResponseHeader
						if err := resp.DecodeHeader(&rh); err != nil {
							t.Errorf("send %q: %v", body, err)
							return
						}
						mu.Lock()
						answers[ci] = append(answers[ci], answer{body, rh})
						mu.Unlock()
					})
				if err != nil {
					t.Errorf("send %q: %v", body, err)
					<-slots
					inflight.Done()
				}
			}
			inflight.Wait()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for ci := range conns {
		if len(answers[ci]) != per {
			t.Fatalf("connection %d: %d answers, want %d", ci, len(answers[ci]), per)
		}
		offsets := map[int64]string{}
		for _, a := range answers[ci] {
			_, phy, err := record.ParseOffsetMessageID(a.hdr.MsgID)
			if err != nil {
				t.Fatalf("answer to %q: msgId %q: %v", a.body, a.hdr.MsgID, err)
			}
			m, err := b.store.ReadMessage(phy)
			if err != nil {
				t.Fatalf("answer to %q: message at %d: %v", a.body, phy, err)
			}
			if string(m.Body) != a.body || m.QueueOffset != a.hdr.QueueOffset || m.QueueID != int32(ci) || a.hdr.QueueID != int32(ci) {
				t.Fatalf("answer to %q names %q (queue %d offset %d), answered queue %d offset %d",
					a.body, m.Body, m.QueueID, m.QueueOffset, a.hdr.QueueID, a.hdr.QueueOffset)
			}
			if prev, dup := offsets[a.hdr.QueueOffset]; dup {
				t.Fatalf("%q and %q answered with queue offset %d", prev, a.body, a.hdr.QueueOffset)
			}
			offsets[a.hdr.QueueOffset] = a.body
		}
	}
}
