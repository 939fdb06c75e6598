package bridge

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt"
)

// BenchmarkStateStoreResponseCycle: a state store response's life
// outside the session, as the front lives it under load: taken from the
// pool for a request, filled (payload, properties), then recycled when
// its client acknowledges it, long after it was sent. 4,096 responses of
// about 450 bytes are in flight at once (more than a core's L2), so the
// one acknowledged is cold, as on a busy server.
func BenchmarkStateStoreResponseCycle(b *testing.B) {
	const inflight = 4096
	reqs := make([]*mqtt.Message, 64)
	for i := range reqs {
		reqs[i] = &mqtt.Message{ResponseTopic: fmt.Sprintf("clients/azure-cpu-%d/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response", i),
			CorrelationData: fmt.Appendf(nil, "corr-%011d", i), Expiry: time.Now().Add(time.Minute)}
	}
	payload := []byte("$100\r\n" + string(make([]byte, 100)) + "\r\n")
	ring := make([]*ssResponse, inflight)
	for i := range ring {
		ring[i] = newSSResponse(reqs[i%len(reqs)])
		ring[i].m.Payload = payload
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % inflight
		ring[k].Recycle(&ring[k].m)
		r := newSSResponse(reqs[i%len(reqs)])
		r.m.Payload = payload
		r.user[2] = mqtt.UserProperty{Key: "__ts", Value: "000001700000000:00000:n"}
		ring[k] = r
	}
}
