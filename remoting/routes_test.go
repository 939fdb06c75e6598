package remoting

import (
	"context"
	"strconv"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Request codes are routed by index below lowCodes and by map above it
// (and for negative codes): each reaches its own processor on both sides
// of the edge, a registration replaces an earlier one for its code, and
// an unregistered code on either side is not supported.
func TestRemotingRoutesAcrossTheIndexedCodes(t *testing.T) {
	codes := []int32{0, 1, lowCodes - 1, lowCodes, lowCodes + 1, 65535, -1, -lowCodes}
	named := func(name string) ProcessorFunc {
		return func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			resp := protocol.NewResponse(protocol.Success, "")
			resp.ExtFields = protocol.ExtFields{"by": name}
			return resp, nil
		}
	}
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		for _, code := range codes {
			s.RegisterFunc(code, PoolDefault, named("stale"))
		}
		for _, code := range codes {
			s.RegisterFunc(code, PoolDefault, named(strconv.Itoa(int(code))))
		}
	})
	c := newClient(t, ClientOptions{})
	for _, code := range codes {
		resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(code, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != protocol.Success || resp.ExtFields["by"] != strconv.Itoa(int(code)) {
			t.Fatalf("code %d answered %d by %q", code, resp.Code, resp.ExtFields["by"])
		}
	}
	for _, code := range []int32{2, lowCodes - 2, lowCodes + 2, -2} {
		resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(code, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != protocol.RequestCodeNotSupported {
			t.Fatalf("unregistered code %d answered %d", code, resp.Code)
		}
	}
}

// BenchmarkRemotingRouteLookup is what the reader pays per request to
// find its route (rawFields, then dispatch's lookup) with a broker's
// hundred registered codes.
func BenchmarkRemotingRouteLookup(b *testing.B) {
	m := newMux(nil, func(Pool) PoolOptions { return PoolOptions{Workers: 1, QueueSize: 1} })
	for code := int32(0); code < 420; code += 4 {
		m.register(code, PoolDefault, ProcessorFunc(echo), RegisterOptions{TypedHeader: code%8 == 0})
	}
	m.register(protocol.SendMessageV2, PoolSend, ProcessorFunc(echo), RegisterOptions{TypedHeader: true})
	b.ReportAllocs()
	n := 0
	for i := 0; i < b.N; i++ {
		code := protocol.SendMessageV2
		if m.rawFields(code) && m.routes.Load().get(code) != nil {
			n++
		}
	}
	if n != b.N {
		b.Fatal("send route not found")
	}
}
