package amqp

import (
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// alarmBackend is a memBackend that raises and clears resource alarms
// (AlarmSource) when the test says so.
type alarmBackend struct {
	*memBackend
	mu  sync.Mutex
	set func(string)
}

func (b *alarmBackend) WatchAlarm(set func(string)) func() {
	b.mu.Lock()
	b.set = set
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.set = nil
		b.mu.Unlock()
	}
}

func (b *alarmBackend) alarm(reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.set == nil {
		panic("no server watches the alarm")
	}
	b.set(reason)
}

// TestAlarmBlocksPublishers: while the backend's resource alarm is
// raised, a connection that publishes is told connection.blocked with
// the reason and its publish waits (not routed, not lost); a connection
// that only consumes and declares is served; when the alarm clears the
// publisher is told connection.unblocked and its message is delivered.
// A client without the capability is not told, but waits all the same.
func TestAlarmBlocksPublishers(t *testing.T) {
	be := &alarmBackend{memBackend: newMemBackend()}
	s, addr := startServer(t, Options{Backend: be})
	cons := dial(t, addr)
	cons.openChannel(1)
	q := cons.declareQueue(1, "alarmed", nil)
	cons.consume(1, q, "c", true)
	pub := dial(t, addr)
	pub.openChannel(1)
	pub.publish(1, "", q, "before")
	if _, body := cons.deliver(); body != "before" {
		t.Fatalf("delivered %q, want before", body)
	}
	silent := dialRaw(t, addr)
	silent.noBlocked = true
	if err := silent.handshake("guest", "guest", "/", 0); err != nil {
		t.Fatal(err)
	}
	silent.openChannel(1)
	states := func() map[string]string {
		out := map[string]string{}
		for _, c := range s.Connections() {
			out[c.Name] = c.State
		}
		return out
	}
	name := func(c *tclient) string { return c.nc.LocalAddr().String() }
	if got := states(); got[name(cons)] != StateRunning || got[name(pub)] != StateRunning || got[name(silent)] != StateRunning {
		t.Fatalf("states before the alarm: %v, want every one running", got)
	}

	be.alarm("low on disk")
	pub.publish(1, "", q, "during")
	if b := expect[*wire.ConnectionBlocked](pub); b.Reason != "low on disk" {
		t.Fatalf("connection.blocked reason %q, want low on disk", b.Reason)
	}
	silent.publish(1, "", q, "silent")
	// The listing says which connection is held (blocked) and which
	// would be if it published (blocking), as rabbitmqctl does.
	waitFor(t, "both publishers listed blocked", func() bool {
		got := states()
		return got[name(pub)] == StateBlocked && got[name(silent)] == StateBlocked
	})
	if got := states(); got[name(cons)] != StateBlocking {
		t.Fatalf("states while blocked: %v, want the consumer's blocking", got)
	}
	// The consumer's connection is not blocked: it declares, and the
	// queue holds neither blocked publish.
	if ok := call[*wire.QueueDeclareOk](cons, 1, &wire.QueueDeclare{Queue: q, Passive: true}); ok.MessageCount != 0 || ok.ConsumerCount != 1 {
		t.Fatalf("passive declare while blocked: %+v, want 0 messages and 1 consumer", ok)
	}

	be.alarm("")
	expect[*wire.ConnectionUnblocked](pub)
	waitFor(t, "every connection running again", func() bool {
		got := states()
		return got[name(cons)] == StateRunning && got[name(pub)] == StateRunning && got[name(silent)] == StateRunning
	})
	got := map[string]bool{}
	for range 2 {
		_, body := cons.deliver()
		got[body] = true
	}
	if !got["during"] || !got["silent"] {
		t.Fatalf("delivered after the alarm cleared: %v, want during and silent", got)
	}
	// The publisher goes on as before.
	pub.publish(1, "", q, "after")
	if _, body := cons.deliver(); body != "after" {
		t.Fatalf("delivered %q, want after", body)
	}
	if ok := call[*wire.QueueDeclareOk](silent, 1, &wire.QueueDeclare{Queue: q, Passive: true}); ok.MessageCount != 0 {
		t.Fatalf("passive declare after: %+v", ok)
	}
}

// TestAlarmBlockedConnectionClosedByServer: a connection blocked at a
// publish ends when the server closes (no hang in Close).
func TestAlarmBlockedConnectionClosedByServer(t *testing.T) {
	be := &alarmBackend{memBackend: newMemBackend()}
	s, addr := startServer(t, Options{Backend: be})
	pub := dial(t, addr)
	pub.openChannel(1)
	be.alarm("low on disk")
	pub.publish(1, "", "nowhere", "during")
	expect[*wire.ConnectionBlocked](pub)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pub.expectConnClose(wire.ConnectionForced)
}

// TestAlarmBlockedClientGone: with heartbeats off (nothing to miss, nothing
// written), a client blocked at a publish that then closes its socket is
// seen gone while the alarm is still raised: the server's connection
// count goes back down. A blocked client that stays, and sends more
// publishes and a heartbeat while blocked, loses none of them: they are
// routed in order once the alarm clears.
func TestAlarmBlockedClientGone(t *testing.T) {
	be := &alarmBackend{memBackend: newMemBackend()}
	s, addr := startServer(t, Options{Backend: be})
	cons := dial(t, addr)
	cons.openChannel(1)
	q := cons.declareQueue(1, "gone", nil)
	cons.consume(1, q, "c", true)
	stays := dial(t, addr)
	stays.openChannel(1)
	leaves := dial(t, addr)
	leaves.openChannel(1)
	waitFor(t, "three connections", func() bool { return len(s.Connections()) == 3 })

	be.alarm("low on disk")
	stays.publish(1, "", q, "one")
	expect[*wire.ConnectionBlocked](stays)
	leaves.publish(1, "", q, "lost")
	expect[*wire.ConnectionBlocked](leaves)
	stays.publish(1, "", q, "two")
	stays.write(wire.AppendHeartbeat(nil))
	stays.publish(1, "", q, "three")
	leaves.nc.Close()
	waitFor(t, "the closed client's connection to end", func() bool { return len(s.Connections()) == 2 })

	be.alarm("")
	expect[*wire.ConnectionUnblocked](stays)
	for _, want := range []string{"one", "two", "three"} {
		if _, body := cons.deliver(); body != want {
			t.Fatalf("delivered %q, want %q", body, want)
		}
	}
}

// TestAlarmBlockedMissesHeartbeats: a blocked client that negotiated
// heartbeats and then sends nothing (its host gone, its socket open) is
// closed for missed heartbeats while the alarm is still raised, as an
// unblocked one would be.
func TestAlarmBlockedMissesHeartbeats(t *testing.T) {
	be := &alarmBackend{memBackend: newMemBackend()}
	s, addr := startServer(t, Options{Backend: be, Heartbeat: time.Second})
	pub := dialRaw(t, addr)
	if err := pub.handshake("guest", "guest", "/", 1); err != nil {
		t.Fatal(err)
	}
	pub.openChannel(1)
	be.alarm("low on disk")
	pub.publish(1, "", "nowhere", "during")
	expect[*wire.ConnectionBlocked](pub)
	waitFor(t, "the silent client's connection to end", func() bool { return len(s.Connections()) == 0 })
}
