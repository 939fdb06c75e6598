package store

import (
	"testing"
	"time"
)

// nopDone is a PutDone that only counts its answers.
type nopDone struct{ n, failed int }

func (d *nopDone) PutDone(res PutResult, err error) {
	d.n++
	if err != nil || res.Status != PutOK {
		d.failed++
	}
}

// BenchmarkStoreDeferredRound: rounds of 64 single puts written behind
// (PutAsyncDeferred) and one Drain that writes and answers them, as a
// connection's reader makes them; 100-byte bodies, so that the put's own
// bookkeeping (the written-behind entry, its answer) weighs next to the
// record's encoding and the round's pwrite. ns/op is per put. clock=put
// reads the clock for every put (PutAsyncDeferred), clock=round once a
// round (PutAsyncDeferredAt, as a broker's reader does with its batch's
// clock).
func BenchmarkStoreDeferredRound(b *testing.B) {
	b.Run("clock=put", func(b *testing.B) { benchDeferredRound(b, false) })
	b.Run("clock=round", func(b *testing.B) { benchDeferredRound(b, true) })
}

func benchDeferredRound(b *testing.B, roundClock bool) {
	const round = 64
	o := benchOptions(b.TempDir())
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msgs := make([]msgSpec, 8)
	for q := range msgs {
		msgs[q] = msgSpec{topic: "T", qid: int32(q), body: string(make([]byte, 100))}
	}
	var d nopDone
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		var at time.Time
		if roundClock {
			at = time.Now()
		}
		for j := 0; j < round && i < b.N; j, i = j+1, i+1 {
			var err error
			if roundClock {
				_, _, err = s.PutAsyncDeferredAt(newMsg(msgs[i%len(msgs)]), false, &d, at)
			} else {
				_, _, err = s.PutAsyncDeferred(newMsg(msgs[i%len(msgs)]), false, &d)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		s.Drain()
	}
	b.StopTimer()
	s.Drain()
	if d.n != b.N || d.failed != 0 {
		b.Fatalf("answered %d of %d, %d failed", d.n, b.N, d.failed)
	}
}
