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
