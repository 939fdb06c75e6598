package bridge

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client/admin"
)

// TestAMQPLoadWaitsForUnindexedMessages: a broker that stored (and
// acknowledged) messages of a durable queue but has not indexed them yet
// (here its dispatcher is held with a dispatch limit; after a crash on a
// full disk it is held until space frees) does not serve them to a
// browse. An AMQP server starting on it must not load the queue without
// them: its start fails with admin.ErrNotIndexed (and is tried again by
// the node), and once the broker indexed them the queue holds every
// confirmed message. Before, the queue loaded without them, and they
// reached no consumer until a new message was stored past them.
func TestAMQPLoadWaitsForUnindexedMessages(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := newAMQPBackend(t, c, 0)
	if err := b.SaveDefinitions(ctx, amqp.Definitions{Queues: []amqp.QueueDef{{VHost: "/", Name: "jobs"}}}); err != nil {
		t.Fatal(err)
	}
	l := openAMQP(t, b, "/", "jobs")
	if r := appendWait(t, l, msg("indexed")); r.err != nil || r.first != 0 {
		t.Fatalf("first append: %+v", r)
	}
	if got := readAll(t, l, 0); len(got) != 1 {
		t.Fatalf("read before the dispatcher is held: %d messages, want 1", len(got))
	}
	st := c.Broker(0).Store()
	st.SetDispatchLimit(st.MaxPhysicalOffset())
	if r := appendWait(t, l, msg("stored-1"), msg("stored-2")); r.err != nil || r.first != 1 {
		t.Fatalf("append while the dispatcher is held: %+v", r)
	}
	b.Close()

	// A restarted node: a new backend, which never stored anything itself.
	b2 := newAMQPBackend(t, c, 2*time.Second)
	l2 := openAMQP(t, b2, "/", "jobs")
	msgs, err := l2.Read(ctx, 1, 10)
	if !errors.Is(err, admin.ErrNotIndexed) {
		t.Fatalf("read of stored but not indexed messages: %d messages, err %v; want admin.ErrNotIndexed", len(msgs), err)
	}
	if _, err := amqp.NewServer(amqp.Options{Backend: b2}); !errors.Is(err, admin.ErrNotIndexed) {
		t.Fatalf("AMQP server start with confirmed messages not indexed: %v; want admin.ErrNotIndexed", err)
	}

	st.SetDispatchLimit(math.MaxInt64)
	b3 := newAMQPBackend(t, c, 0)
	srv, err := amqp.NewServer(amqp.Options{Backend: b3})
	if err != nil {
		t.Fatalf("AMQP server start once the broker indexed its log: %v", err)
	}
	defer srv.Close()
	qs, err := srv.Queues("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Name != "jobs" || qs[0].Ready != 3 {
		t.Fatalf("queues after the start: %+v, want jobs with 3 ready messages", qs)
	}
	if got := readAll(t, l2, 1); len(got) != 2 || string(got[0].Body) != "stored-1" || string(got[1].Body) != "stored-2" {
		t.Fatalf("read once indexed: %+v", got)
	}
}
