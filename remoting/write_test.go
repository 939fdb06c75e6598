package remoting

import (
	"errors"
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
	const codeNotice int32 = 9301
	// 200 answers of 64 KiB (stalledPeer): far more than the socket
	// buffers and MaxWriteQueue hold while the peer does not read.
	start := time.Now()
	c, r := stalledPeer(t, 64<<10)
	// Neither does a notice sent with OnewayNoWait.
	if err := c.OnewayNoWait(protocol.NewRequest(codeNotice, nil, nil)); err != nil {
		t.Fatal(err)
	}
	// A blocking write would wait out the server's WriteTimeout (30 s).
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("answering a peer that does not read took %v", d)
	}
	const n = stalledAnswers
	for i := 1; i <= n; i++ {
		resp, err := r.read()
		if err != nil || resp.Opaque != int32(i) || len(resp.Body) != 64<<10 {
			t.Fatalf("answer %d: %v %v", i, resp, err)
		}
	}
	if notice, err := r.read(); err != nil || notice.Code != codeNotice || !notice.IsOneway() || notice.IsResponse() {
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

// stalledAnswers is how many answers of 64 KiB stalledPeer leaves waiting.
const stalledAnswers = 200

// stalledPeer returns the server side of a connection whose peer (the
// returned raw connection) stopped reading: 200 answers of 64 KiB wait
// for its socket, more than the socket buffers hold, so the connection's
// writer is stuck in a write.
func stalledPeer(t *testing.T, maxQueue int64) (*Conn, *rawConn) {
	t.Helper()
	const codeLater int32 = 9311
	type held struct {
		c   *Conn
		req *protocol.Command
	}
	heldc := make(chan held, 256)
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{MaxWriteQueue: maxQueue}}, func(s *Server) {
		s.RegisterInline(codeLater, PoolDefault, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			heldc <- held{c, req}
			return nil, nil
		}))
	})
	r := dialRaw(t, addr)
	const n = stalledAnswers
	for i := 1; i <= n; i++ {
		req := protocol.NewRequest(codeLater, nil, nil)
		req.Opaque = int32(i)
		r.send(req)
	}
	var c *Conn
	for range n {
		h := <-heldc
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = make([]byte, 64<<10)
		if err := h.c.WriteResponse(h.req, resp); err != nil {
			t.Fatal(err)
		}
		c = h.c
	}
	return c, r
}

// InvokeNoWait never waits for a peer that stopped reading: with
// MaxWriteQueue bytes waiting it is refused at once (ErrNotReading); with
// fewer, the request is queued and times out after its own timeout
// (ErrTimeout and ErrNotReading: still unwritten), not after WriteTimeout.
// A peer that reads gets it and is answered.
func TestRemotingInvokeNoWaitToStalledPeer(t *testing.T) {
	const codeCall int32 = 9312
	result := func(c *Conn, timeout time.Duration) (func() (*protocol.Command, error), error) {
		type res struct {
			resp *protocol.Command
			err  error
		}
		ch := make(chan res, 1)
		err := c.InvokeNoWait(protocol.NewRequest(codeCall, nil, nil), timeout, func(resp *protocol.Command, err error) {
			ch <- res{resp, err}
		})
		return func() (*protocol.Command, error) {
			select {
			case r := <-ch:
				return r.resp, r.err
			case <-time.After(20 * time.Second):
				t.Fatal("InvokeNoWait: no callback within 20 s")
				return nil, nil
			}
		}, err
	}

	// Queue full: refused without queuing.
	c, _ := stalledPeer(t, 64<<10)
	start := time.Now()
	if _, err := result(c, time.Second); !errors.Is(err, ErrNotReading) {
		t.Fatalf("call to a stalled peer with a full queue: %v, want ErrNotReading", err)
	}
	// The bounds below only need to stay clear of the server's
	// WriteTimeout (30 s), which a blocking write would wait out; a
	// loaded machine can stall the test for seconds.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("refusal took %v", d)
	}

	// Queue below its bound: queued, timed out after 300 ms, unwritten.
	c, r := stalledPeer(t, 64<<20)
	start = time.Now()
	wait, err := result(c, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("queuing took %v", d)
	}
	if _, err := wait(); !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrNotReading) {
		t.Fatalf("unanswered call: %v, want ErrTimeout and ErrNotReading", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("timeout after %v, want about 300 ms", d)
	}
	// The peer reads again: the 200 answers, then the call.
	for i := 1; i <= 200; i++ {
		if resp, err := r.read(); err != nil || resp.Opaque != int32(i) {
			t.Fatalf("answer %d: %v %v", i, resp, err)
		}
	}
	if req, err := r.read(); err != nil || req.Code != codeCall || req.IsResponse() || req.IsOneway() {
		t.Fatalf("queued call: %v %v", req, err)
	}

	// A peer that reads answers the call.
	wait, err = result(c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, err := r.read()
	if err != nil || req.Code != codeCall {
		t.Fatalf("call: %v %v", req, err)
	}
	resp := protocol.NewResponse(protocol.Success, "answered")
	resp.Opaque, resp.Flag = req.Opaque, protocol.FlagResponse
	r.send(resp)
	if got, err := wait(); err != nil || got.Remark != "answered" {
		t.Fatalf("answered call: %v %v", got, err)
	}
}

// A writer that took everything queued in one write leaves nothing queued
// behind it, however much of that write the socket of a peer that stopped
// reading has not taken: the connection is still not reading, and
// InvokeNoWait is refused, not queued behind the stuck write to wait for
// its timeout. Once the peer reads, calls are sent again.
func TestRemotingInvokeNoWaitBehindOneStuckWrite(t *testing.T) {
	const codeLater, codeCall int32 = 9313, 9314
	type held struct {
		c   *Conn
		req *protocol.Command
	}
	heldc := make(chan held, 1)
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{MaxWriteQueue: 64 << 10}}, func(s *Server) {
		s.RegisterInline(codeLater, PoolDefault, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			heldc <- held{c, req}
			return nil, nil
		}))
	})
	r := dialRaw(t, addr)
	req := protocol.NewRequest(codeLater, nil, nil)
	req.Opaque = 1
	r.send(req)
	h := <-heldc
	c := h.c
	// One answer of 12 MiB: far more than the socket buffers hold, taken
	// whole by the writer goroutine.
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Body = make([]byte, 12<<20)
	if err := c.WriteResponse(h.req, resp); err != nil {
		t.Fatal(err)
	}
	// Taken whole, and its write under way: the writer empties the
	// queue a moment before its write call records what is left.
	testutil.WaitFor(t, 10*time.Second, "the writer to take the answer whole", func() bool {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		return c.writing && len(c.wbuf) == 0 && c.wext == 0 && c.sock.left.Load() > 0
	})
	if !c.NotReading() {
		t.Fatal("NotReading: false while a write of 12 MiB is stuck")
	}
	if err := c.InvokeNoWait(protocol.NewRequest(codeCall, nil, nil), 10*time.Second, func(*protocol.Command, error) {
		t.Error("refused call: callback ran")
	}); !errors.Is(err, ErrNotReading) {
		t.Fatalf("call behind a stuck write of 12 MiB: %v, want ErrNotReading", err)
	}

	// The peer reads: the answer, then calls are sent again.
	if got, err := r.read(); err != nil || got.Opaque != 1 || len(got.Body) != 12<<20 {
		t.Fatalf("answer: %v %v", got, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the connection to read again", func() bool { return !c.NotReading() })
	called := make(chan error, 1)
	if err := c.InvokeNoWait(protocol.NewRequest(codeCall, nil, nil), 10*time.Second, func(_ *protocol.Command, err error) {
		called <- err
	}); err != nil {
		t.Fatalf("call to a peer that reads: %v", err)
	}
	call, err := r.read()
	if err != nil || call.Code != codeCall {
		t.Fatalf("call: %v %v", call, err)
	}
	answer := protocol.NewResponse(protocol.Success, "")
	answer.Opaque, answer.Flag = call.Opaque, protocol.FlagResponse
	r.send(answer)
	if err := <-called; err != nil {
		t.Fatalf("answered call: %v", err)
	}
}
