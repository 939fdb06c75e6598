package mqtt

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkIDs reports what is wrong with ss's entries in flight ("" when
// nothing): id (not 0) in flight before it was added, or an entry back
// from a saved session in flight while the oldest is not marked restored
// (allocIDLocked would not look). It returns its finding instead of
// failing t (t.Helper, called a million times, took most of the test's
// time under -race).
func checkIDs(ss *session, id uint16) string {
	restored := false
	for _, o := range ss.inflight {
		if id != 0 && o.id == id {
			return fmt.Sprintf("id %d handed out while in flight", id)
		}
		restored = restored || o.restored
	}
	if restored && !ss.inflight[0].restored {
		return "a restored entry in flight, the oldest not marked"
	}
	return ""
}

// A session's packet ids, handed out without looking through the
// entries while the oldest is recent, are never 0 nor one in flight:
// across the wrap at 65535, with an entry left unacknowledged for more
// than 65535 sends, with ids back from a saved session (restore) and
// with acknowledgements of any entry, not only the oldest.
func TestMQTTSessionPacketIDsNeverInFlight(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, most := range []int{1, 2, 20, 40, 300} {
		ss := &session{nextID: 65000}
		for step := 0; step < 200_000; step++ {
			switch r := rng.IntN(100); {
			case r < 2 && len(ss.inflight) < most && (most != 300 || step >= 150_000):
				// Back from a saved session: any id not in flight.
				id := uint16(1 + rng.IntN(65535))
				if !ss.idInFlightLocked(id) {
					ss.addRestoredLocked(outMsg{msg: &Message{}, id: id, qos: 1})
				}
			case r < 55 && len(ss.inflight) < most:
				id := ss.allocIDLocked()
				if id == 0 {
					t.Fatal("id 0 handed out")
				}
				if bad := checkIDs(ss, id); bad != "" {
					t.Fatalf("most %d, step %d: %s", most, step, bad)
				}
				ss.inflight = append(ss.inflight, outMsg{msg: &Message{}, id: id, qos: 1, step: ss.steps})
			case len(ss.inflight) > 0:
				i := 0 // mostly the oldest, as clients acknowledge
				if rng.IntN(4) == 0 {
					i = rng.IntN(len(ss.inflight))
				}
				if most == 300 && step < 150_000 {
					// The oldest stays unacknowledged for more than
					// 65535 sends.
					if len(ss.inflight) == 1 {
						break
					}
					i = 1 + rng.IntN(len(ss.inflight)-1)
				}
				ss.removeInflightLocked(i)
			}
			if bad := checkIDs(ss, 0); bad != "" {
				t.Fatalf("most %d, step %d: %s", most, step, bad)
			}
		}
	}
}

// BenchmarkMQTTSessionInflight is a QoS 1 send's packet id and in-flight
// entry, then the acknowledgement of the session's oldest message, with
// inflight messages in flight in each of 4,096 sessions taken in turn
// (their entries out of the CPU's caches, as in a server with many
// clients). "scan" looks for every id in the entries, as before.
func BenchmarkMQTTSessionInflight(b *testing.B) {
	for _, inflight := range []int{1, 8, 20} {
		for _, mode := range []string{"scan", "steps"} {
			b.Run(fmt.Sprintf("inflight=%d/%s", inflight, mode), func(b *testing.B) {
				ss := make([]session, 4096)
				msg := &Message{}
				for i := range ss {
					for range inflight {
						ss[i].inflight = append(ss[i].inflight, outMsg{msg: msg, id: ss[i].allocIDLocked(), qos: 1, step: ss[i].steps})
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s := &ss[i%len(ss)]
					var id uint16
					if mode == "steps" {
						id = s.allocIDLocked()
					} else {
						for {
							s.nextID++
							s.steps++
							if s.nextID == 0 {
								s.nextID = 1
							}
							if !s.idInFlightLocked(s.nextID) {
								break
							}
						}
						id = s.nextID
					}
					s.inflight = append(s.inflight, outMsg{msg: msg, id: id, qos: 1, step: s.steps})
					s.removeInflightLocked(0)
				}
			})
		}
	}
}
