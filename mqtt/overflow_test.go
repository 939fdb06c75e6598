package mqtt

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestServerSharedFullMemberPasses: a member of a shared subscription
// whose queue is full (Receive Maximum 1, nothing acknowledged, queue
// limit 2) passes messages to the other member instead of dropping them;
// once it is the only member, TryDeliverShared reports full and drops
// nothing (the caller keeps the message), while DeliverShared drops and
// counts it.
func TestServerSharedFullMemberPasses(t *testing.T) {
	s := startServer(t, func(o *Options) { o.MaxQueuedMessages = 2 })
	slow := dialRaw(t, s.addr, packets.Version5)
	cp := &packets.Connect{ClientID: "slow", CleanStart: true, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropReceiveMaximum)
	cp.Properties.ReceiveMaximum = 1
	if ack := slow.connect(cp); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	slow.subscribe(1, sub("$share/g/jobs/#", 1))
	fast := connected(t, s.addr, packets.Version5, "fast")
	fast.subscribe(1, sub("$share/g/jobs/#", 1))
	const n = 12
	for i := range n {
		ok, full := s.TryDeliverShared("$share/g/jobs/#", &Message{Topic: "jobs/x", QoS: 1, Payload: []byte{byte('a' + i)}})
		if !ok || full {
			t.Fatalf("message %d: delivered %v, full %v", i, ok, full)
		}
	}
	// slow holds 1 in flight and 2 queued; fast got the rest.
	if got := len(slow.collect(200 * time.Millisecond)); got != 1 {
		t.Fatalf("slow member got %d", got)
	}
	if got := len(fast.collect(200 * time.Millisecond)); got != n-3 {
		t.Fatalf("fast member got %d, want %d", got, n-3)
	}
	if d := s.Stats().Dropped.Load(); d != 0 {
		t.Fatalf("%d dropped", d)
	}
	fast.send(&packets.Disconnect{})
	testutil.WaitFor(t, 10*time.Second, "fast gone", func() bool { return !s.Connected("fast") })
	ok, full := s.TryDeliverShared("$share/g/jobs/#", &Message{Topic: "jobs/x", QoS: 1, Payload: []byte("kept")})
	if ok || !full {
		t.Fatalf("only a full member left: delivered %v, full %v", ok, full)
	}
	if d := s.Stats().Dropped.Load(); d != 0 {
		t.Fatalf("TryDeliverShared dropped %d", d)
	}
	if s.DeliverShared("$share/g/jobs/#", &Message{Topic: "jobs/x", QoS: 1, Payload: []byte("dropped")}) {
		t.Fatal("DeliverShared delivered to a full member")
	}
	if d := s.Stats().Dropped.Load(); d != 1 {
		t.Fatalf("DeliverShared counted %d drops, want 1", d)
	}
	slow.nothing(100 * time.Millisecond)
}
