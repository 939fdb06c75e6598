package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkStoreStatsPutCount is the cost per put of counting stored
// puts from two goroutines at once (the broker's readers drain rounds
// of write-behind puts on both CPUs): one put at a time (recordPut,
// three atomic adds) against a round's puts tallied and added at once
// (putTally, recordTally: answerWrittenLocked).
func BenchmarkStoreStatsPutCount(b *testing.B) {
	b.Run("each", func(b *testing.B) {
		var c statCounters
		b.SetParallelism(1)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.recordPut(1, 1300, 30*time.Microsecond)
			}
		})
	})
	for _, round := range []int{4, 16} {
		b.Run(fmt.Sprintf("round=%d", round), func(b *testing.B) {
			var c statCounters
			b.SetParallelism(1)
			b.RunParallel(func(pb *testing.PB) {
				var t putTally
				for i := 1; pb.Next(); i++ {
					t.add(1, 1300, 30*time.Microsecond)
					if i%round == 0 {
						c.recordTally(&t)
						t = putTally{}
					}
				}
				c.recordTally(&t)
			})
		})
	}
}
