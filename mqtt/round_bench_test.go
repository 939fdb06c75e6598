package mqtt

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// BenchmarkMQTTRoundClock is the clock's cost per request on the poller:
// a connection's last receipt and the expiry of the request's message,
// eight requests a round. "each" reads the clock for every request (nil
// Round: what a worker does, and what the poller did before), "round"
// once per round (Round.wallNow, Round.monoNow).
func BenchmarkMQTTRoundClock(b *testing.B) {
	var pr packets.Properties
	pr.Present.Add(packets.PropMessageExpiry)
	pr.MessageExpiry = 10
	for _, mode := range []string{"each", "round"} {
		b.Run(mode, func(b *testing.B) {
			var r Round
			rp := &r
			if mode == "each" {
				rp = nil
			}
			var m Message
			var last int64
			for i := 0; i < b.N; i++ {
				m = Message{}
				fillMessage(&m, "t", nil, 1, false, &pr, rp)
				last = rp.monoNow()
				if i%8 == 7 {
					r.wall, r.mono = time.Time{}, 0
				}
			}
			if m.Expiry.IsZero() || last == 0 {
				b.Fatal("no clock read")
			}
		})
	}
}
