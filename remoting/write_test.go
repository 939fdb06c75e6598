package remoting

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// WriteResponse and OnewayNoWait never block, even towards a peer that
// stopped reading: a goroutine answering requests later (a group commit,
// a woken pull) or notifying many peers must not be held up by one slow
// peer. Everything is written once the peer reads again.
func TestRemotingWriteResponseNeverBlocks(t *testing.T) {
	const codeLater int32 = 9301
	type held struct {
		c   *Conn
		req *protocol.Command
	}
	heldc := make(chan held, 1024)
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{MaxWriteQueue: 64 << 10}}, func(s *Server) {
		s.RegisterInline(codeLater, PoolDefault, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			heldc <- held{c, req}
			return nil, nil // answered later, from another goroutine
		}))
	})
	r := dialRaw(t, addr)
	const n = 200
	for i := 1; i <= n; i++ {
		req := protocol.NewRequest(codeLater, nil, nil)
		req.Opaque = int32(i)
		r.send(req)
	}
	// 200 answers of 64 KiB: far more than the socket buffers and
	// MaxWriteQueue hold while the peer does not read.
	start := time.Now()
	var c *Conn
	for i := 0; i < n; i++ {
		h := <-heldc
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = make([]byte, 64<<10)
		if err := h.c.WriteResponse(h.req, resp); err != nil {
			t.Fatal(err)
		}
		c = h.c
	}
	// Neither does a notice sent with OnewayNoWait.
	if err := c.OnewayNoWait(protocol.NewRequest(codeLater, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answering a peer that does not read took %v", d)
	}
	for i := 1; i <= n; i++ {
		resp, err := r.read()
		if err != nil || resp.Opaque != int32(i) || len(resp.Body) != 64<<10 {
			t.Fatalf("answer %d: %v %v", i, resp, err)
		}
	}
	if notice, err := r.read(); err != nil || notice.Code != codeLater || !notice.IsOneway() || notice.IsResponse() {
		t.Fatalf("notice: %v %v", notice, err)
	}
}

// A peer that sends requests but does not read their answers is held back:
// once MaxWriteQueue bytes of answers wait, the server stops reading its
// requests (its memory stays bounded) until the peer reads again; then
// every request is answered, in order.
func TestRemotingReaderWaitsForSlowPeer(t *testing.T) {
	const codeBig int32 = 9302
	var served atomic.Int64
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{MaxWriteQueue: 256 << 10}}, func(s *Server) {
		s.RegisterInline(codeBig, PoolDefault, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			served.Add(1)
			resp := protocol.NewResponse(protocol.Success, "")
			resp.Body = make([]byte, 32<<10)
			return resp, nil
		}))
	})
	r := dialRaw(t, addr)
	const n = 2000 // 64 MiB of answers
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 1; i <= n; i++ {
			req := protocol.NewRequest(codeBig, nil, nil)
			req.Opaque = int32(i)
			b, _ := protocol.EncodeFrame(req)
			if _, err := r.nc.Write(b); err != nil {
				return
			}
		}
	}()
	// The server serves until its write queue and the socket buffers are
	// full, then stops: the count stays far below n.
	var last int64 = -1
	testutil.WaitFor(t, 10*time.Second, "the server to stop reading", func() bool {
		cur := served.Load()
		stable := cur == last && cur > 0
		last = cur
		time.Sleep(50 * time.Millisecond)
		return stable
	})
	if s := served.Load(); s >= n/2 {
		t.Fatalf("served %d of %d requests whose answers nobody read", s, n)
	}
	for i := 1; i <= n; i++ {
		resp, err := r.read()
		if err != nil || resp.Opaque != int32(i) {
			t.Fatalf("answer %d: %v %v", i, resp, err)
		}
	}
	<-sent
	if s := served.Load(); s != n {
		t.Fatalf("served %d of %d", s, n)
	}

}
