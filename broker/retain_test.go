package broker

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/obs"
	"github.com/smartgo/smartgo/internal/testutil"
)

// The broker's Retained rules keep, through retention of expired
// segments, a protected topic's messages from its group's committed
// offset on (all of them before the group commits), and the newest
// message of a Newest rule's topic; an unprotected topic's expired
// messages go, and smartgo_store_retain_held_bytes says what the floor
// holds.
func TestBrokerRetainedTopicsOutliveRetention(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := testBroker(t, t.TempDir(), func(o *Options) {
		o.Store.Now = clock
		o.Store.FileReservedTime = time.Minute
		o.Retained = []RetainRule{{Prefix: "KEEP_", Group: "g"}, {Prefix: "DEFS", Newest: 1}}
	})
	reg := obs.NewRegistry()
	reg.MustRegister(b.Collectors()...)
	ms, err := obs.Serve("127.0.0.1:0", reg, &obs.Health{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	held := func() float64 { return sample(scrapeMetrics(t, ms.Addr()), "smartgo_store_retain_held_bytes") }

	// 1 MiB segments, 64 KiB messages: about 16 to a segment.
	c := newTestClient(t, b.Addr())
	body := strings.Repeat("r", 64<<10)
	send := func(topic string, n int) {
		for range n {
			c.mustSend(topic, 0, body, "")
		}
	}
	send("Drop", 40)
	send("KEEP_q", 20)
	send("DEFS", 2)
	send("Drop", 40)
	st := b.Store()
	// Retention deletes only what is stored, dispatched, indexed and
	// flushed.
	testutil.WaitFor(t, 10*time.Second, "every message flushed and indexed", func() bool {
		s := st.Stats()
		return st.MaxOffset("Drop", 0) == 80 && s.FlushLagBytes == 0 && s.DispatchLagBytes == 0 && s.IndexLagBytes == 0
	})
	cleanAll := func() {
		for st.CleanExpired() > 0 {
		}
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()

	cleanAll()
	if min := st.MinOffset("KEEP_q", 0); min != 0 {
		t.Fatalf("protected queue's min offset %d before any commit", min)
	}
	if min := st.MinOffset("Drop", 0); min == 0 || min >= 40 {
		t.Fatalf("unprotected queue's min offset %d: want its expired head deleted up to the protected queue", min)
	}
	if v := held(); v < 1<<20 {
		t.Fatalf("smartgo_store_retain_held_bytes = %v, want at least a segment", v)
	}

	// The group acked everything: the definitions' newest message holds.
	commitOffset(t, c, "g", "KEEP_q", 0, 20)
	cleanAll()
	if min := st.MinOffset("KEEP_q", 0); min == 0 {
		t.Fatal("acked queue's expired segments kept")
	}
	if min := st.MinOffset("DEFS", 0); min > 1 {
		t.Fatalf("newest DEFS message deleted (min offset %d)", min)
	}
	if v := held(); v == 0 {
		t.Fatal("smartgo_store_retain_held_bytes = 0 while the newest DEFS message holds segments")
	}
}
