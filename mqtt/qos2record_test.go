package mqtt

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// recordingBackend is a MemoryBackend with QoS2Backend whose records
// complete when the test releases them.
type recordingBackend struct {
	*MemoryBackend
	mu      sync.Mutex
	waiting []func()
}

func (b *recordingBackend) RecordQoS2(_ string, done func()) {
	b.mu.Lock()
	b.waiting = append(b.waiting, done)
	b.mu.Unlock()
}

func (b *recordingBackend) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

func (b *recordingBackend) releaseAll() {
	b.mu.Lock()
	w := b.waiting
	b.waiting = nil
	b.mu.Unlock()
	for _, fn := range w {
		fn()
	}
}

// TestMQTTQoS2RecordBeforeAcks: with a QoS2Backend, the PUBREC of a
// stored QoS 2 message of a persistent session, the PUBCOMP answering
// its PUBREL and the PUBREL answering a PUBREC wait until the backend
// recorded the session's state, which holds the received and released
// ids. A message waiting for its record counts once against the receive
// maximum: stored messages whose PUBREC waits used to count twice, and a
// client within its limit was disconnected with 0x93 (mosquitto_pub -l
// against a bridge).
func TestMQTTQoS2RecordBeforeAcks(t *testing.T) {
	rb := &recordingBackend{MemoryBackend: NewMemoryBackend()}
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	opts.ReceiveMaximum = 4
	opts.Logger = slog.New(slog.DiscardHandler)
	s, err := NewServer(opts, rb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := s.Addrs()[0].String()
	r := dialRaw(t, addr, v5)
	expiry := uint32(600)
	cp := &packets.Connect{ClientID: "rec", CleanStart: true, KeepAlive: 60}
	cp.Properties.SessionExpiry = expiry
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	if ack := r.connect(cp); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	for i := 1; i <= 3; i++ {
		r.send(&packets.Publish{QoS: 2, PacketID: uint16(i), Topic: "rec/t", Payload: []byte{byte(i)}})
	}
	testutil.WaitFor(t, 5*time.Second, "3 stores waiting for their records", func() bool { return rb.pending() == 3 })
	r.nothing(100 * time.Millisecond)
	if st, _ := s.Snapshot("rec"); st == nil || len(st.Received) != 3 {
		t.Fatalf("snapshot while the PUBRECs wait: %+v", st)
	}
	// A fourth is within the receive maximum of 4.
	r.send(&packets.Publish{QoS: 2, PacketID: 4, Topic: "rec/t", Payload: []byte{4}})
	testutil.WaitFor(t, 5*time.Second, "4 stores waiting for their records", func() bool { return rb.pending() == 4 })
	rb.releaseAll()
	for i := 1; i <= 4; i++ {
		if a, ok := r.recv().(*packets.Pubrec); !ok || a.PacketID != uint16(i) {
			t.Fatalf("want PUBREC %d, got %+v", i, a)
		}
	}
	r.send(&packets.Pubrel{PacketID: 1})
	testutil.WaitFor(t, 5*time.Second, "the release waiting for its record", func() bool { return rb.pending() == 1 })
	r.nothing(100 * time.Millisecond)
	if st, _ := s.Snapshot("rec"); st == nil || len(st.Received) != 3 {
		t.Fatalf("snapshot while the PUBCOMP waits: %+v", st)
	}
	rb.releaseAll()
	if c, ok := r.recv().(*packets.Pubcomp); !ok || c.PacketID != 1 || c.ReasonCode != 0 {
		t.Fatalf("want PUBCOMP 1, got %+v", c)
	}
}
