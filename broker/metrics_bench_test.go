package broker

import (
	"testing"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// BenchmarkBrokerMetricsSendTimer: what the send latency histogram adds to
// each send request (two clock reads and an Observe), next to the same
// processor call without it, in the same run.
func BenchmarkBrokerMetricsSendTimer(b *testing.B) {
	resp := protocol.NewResponse(protocol.Success, "")
	proc := func(*remoting.Conn, *protocol.Command) (*protocol.Command, error) { return resp, nil }
	m := newMetrics()
	timed := func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		start := m.sendStart()
		resp, err := proc(c, req)
		m.sendDone(start)
		return resp, err
	}
	req := protocol.NewRequest(protocol.SendMessage, nil, nil)
	b.Run("baseline", func(b *testing.B) {
		for range b.N {
			_, _ = proc(nil, req)
		}
	})
	b.Run("timed", func(b *testing.B) {
		for range b.N {
			_, _ = timed(nil, req)
		}
	})
}
