package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// drainPut is one put made with PutAsyncDeferred, told its outcome.
type drainPut struct {
	s      *Store
	body   string
	inCall *atomic.Bool // set while its putter is inside Drain
	res    PutResult
	err    error
	calls  atomic.Int32
	inside bool // answered inside its putter's Drain
	bad    string
}

func (p *drainPut) PutDone(res PutResult, err error) {
	p.res, p.err = res, err
	p.inside = p.inCall.Load()
	if err == nil {
		// Answered only once the record is readable.
		if m, rerr := p.s.ReadMessage(res.PhysicalOffset); rerr != nil || string(m.Body) != p.body {
			p.bad = fmt.Sprintf("record at %d not readable when answered: %v", res.PhysicalOffset, rerr)
		}
	}
	p.calls.Add(1)
}

// TestStoreDrain: puts made with PutAsyncDeferred wake nobody and are
// written out and answered by their putter's Drain (on the putter's
// goroutine when no other drain is under way), each once, only once its
// record is readable, and are dispatched to their queues in order; four
// putters draining their own batches at once share the writes safely.
func TestStoreDrain(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
	}{
		{"async-hybrid", nil},
		{"async-pwrite", func(o *Options) { o.AsyncWrites = AsyncWritePwrite }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), tc.opts)
			const putters, batches, per = 4, 40, 10
			puts := make([][]*drainPut, putters)
			var inside atomic.Int64
			var wg sync.WaitGroup
			for g := range putters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var inCall atomic.Bool
					for b := range batches {
						for i := range per {
							p := &drainPut{s: s, body: fmt.Sprint("m", g, "-", b, "-", i), inCall: &inCall}
							puts[g] = append(puts[g], p)
							m := newMsg(msgSpec{topic: "T", qid: int32(g), body: p.body})
							if _, pending, err := s.PutAsyncDeferred(m, false, p); err != nil || !pending {
								t.Errorf("put: pending %v, %v", pending, err)
								return
							}
						}
						inCall.Store(true)
						s.Drain()
						inCall.Store(false)
					}
				}()
			}
			wg.Wait()
			for g := range putters {
				for i, p := range puts[g] {
					testutil.WaitFor(t, 10*time.Second, "every deferred put answered", func() bool { return p.calls.Load() > 0 })
					switch {
					case p.calls.Load() != 1:
						t.Fatalf("put %d of %d answered %d times", i, g, p.calls.Load())
					case p.err != nil || p.res.Status != PutOK:
						t.Fatalf("put %d of %d: %v %v", i, g, p.res.Status, p.err)
					case p.bad != "":
						t.Fatal(p.bad)
					case p.res.QueueOffset != int64(i):
						t.Fatalf("put %d of %d has queue offset %d", i, g, p.res.QueueOffset)
					}
					if p.inside {
						inside.Add(1)
					}
				}
			}
			if inside.Load() == 0 {
				t.Fatal("no put was answered by its own putter's Drain")
			}
			waitDispatched(t, s)
			for q := range int32(putters) {
				got := readAll(t, s, "T", q)
				if len(got) != batches*per {
					t.Fatalf("queue %d has %d messages, want %d", q, len(got), batches*per)
				}
				for i, m := range got {
					if want := puts[q][i].body; string(m.Body) != want {
						t.Fatalf("queue %d offset %d: %q, want %q", q, i, m.Body, want)
					}
				}
			}
		})
	}
}

// TestStorePutAsyncDeferredAt: a put made with PutAsyncDeferredAt is
// stamped and timed from the caller's clock reading, not the store's: a
// reading 300 ms old gives a store time 300 ms back and a latency of at
// least 300 ms. A later put with a reading from before the last put's is
// stamped no earlier than that put (store times do not go back), and a
// zero reading reads the clock.
func TestStorePutAsyncDeferredAt(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	put := func(body string, at time.Time) PutResult {
		t.Helper()
		var inCall atomic.Bool
		p := &drainPut{s: s, body: body, inCall: &inCall}
		m := newMsg(msgSpec{topic: "T", body: body})
		if _, pending, err := s.PutAsyncDeferredAt(m, false, p, at); err != nil || !pending {
			t.Fatalf("put %s: pending %v, %v", body, pending, err)
		}
		s.Drain()
		testutil.WaitFor(t, 10*time.Second, "the put answered", func() bool { return p.calls.Load() > 0 })
		if p.err != nil || p.res.Status != PutOK || p.bad != "" {
			t.Fatalf("put %s: %v %v %s", body, p.res.Status, p.err, p.bad)
		}
		stored, err := s.ReadMessage(p.res.PhysicalOffset)
		if err != nil || stored.StoreTimestamp != p.res.StoreTimestamp {
			t.Fatalf("put %s: read back store time %d, %v; answered %d", body, stored.StoreTimestamp, err, p.res.StoreTimestamp)
		}
		return p.res
	}
	const back = 300 * time.Millisecond
	now := time.Now()
	old := put("old", now.Add(-back))
	after := time.Now()
	if want := now.Add(-back).UnixMilli(); old.StoreTimestamp < want-1 || old.StoreTimestamp > want+1 {
		t.Errorf("store time %d for a put begun at %d", old.StoreTimestamp, want)
	}
	if old.Latency < back || old.Latency > after.Sub(now)+back {
		t.Errorf("latency %v for a put begun %v before the call", old.Latency, back)
	}
	// Not before the call (1 ms: the store time follows the monotonic
	// clock from a wall-clock reading); how long the call took does not
	// matter.
	before := time.Now()
	cur := put("now", time.Time{})
	if cur.StoreTimestamp < before.UnixMilli()-1 {
		t.Errorf("a put without a reading stamped %d, before it was %d", cur.StoreTimestamp, before.UnixMilli())
	}
	// A reading older than the last put's (another reader's batch that
	// began first): stamped no earlier than the last put. It is taken
	// back from before, not from now: the clamp covers readings under a
	// second older than the last stamp, and the first put's drain and
	// read back may stall for most of that on a loaded machine.
	late := put("late", before.Add(-back/2))
	if late.StoreTimestamp < cur.StoreTimestamp {
		t.Errorf("store time went back: %d after %d", late.StoreTimestamp, cur.StoreTimestamp)
	}
}
