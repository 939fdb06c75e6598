package store

import "testing"

// BenchmarkStoreCQAppendRound: a dispatch round's appends to one consume
// queue, 64 a round, the queue's entries shown to readers (publish, an
// atomic store) after each entry (publish=entry, as every append did
// before the rounds staged them) or once a round (publish=round, as the
// dispatcher does). ns/op is per entry.
func BenchmarkStoreCQAppendRound(b *testing.B) {
	b.Run("publish=entry", func(b *testing.B) { benchCQAppendRound(b, 1) })
	b.Run("publish=round", func(b *testing.B) { benchCQAppendRound(b, 64) })
}

func benchCQAppendRound(b *testing.B, every int) {
	cq := dispatcherQueue(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		off := cq.next()
		if _, ok, err := cq.appendEntry(off, cqEntry{phy: off * 100, size: 100, tags: off}, 0); !ok || err != nil {
			b.Fatalf("append %d: %v %v", off, ok, err)
		}
		if (i+1)%every == 0 {
			cq.publish()
		}
	}
	cq.publish()
}
