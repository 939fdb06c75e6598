package remoting

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

const codeEcho int32 = 9000

func echo(c *Conn, req *protocol.Command) (*protocol.Command, error) {
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Body = req.Body
	resp.ExtFields = protocol.ExtFields{"v": req.ExtFields["v"]}
	return resp, nil
}

func startServer(t *testing.T, opts Options, setup func(s *Server)) (*Server, string, *testutil.LogBuffer) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	opts.Addr = "127.0.0.1:0"
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterFunc(codeEcho, PoolDefault, echo)
	if setup != nil {
		setup(s)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.Addr().String(), logs
}

func newClient(t *testing.T, opts ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func echoReq(v string, body []byte) *protocol.Command {
	r := protocol.NewRequest(codeEcho, nil, body)
	r.ExtFields = protocol.ExtFields{"v": v}
	return r
}

func TestRemotingRoundTripBothSerializeTypes(t *testing.T) {
	_, addr, _ := startServer(t, Options{}, nil)
	for _, st := range []protocol.SerializeType{protocol.SerializeJSON, protocol.SerializeRocketMQ} {
		c := newClient(t, ClientOptions{SerializeType: st})
		big := bytes.Repeat([]byte("x"), 100<<10) // above copyBodyMax: written without copy
		for _, body := range [][]byte{nil, []byte("hello"), big} {
			resp, err := c.Invoke(context.Background(), addr, echoReq(st.String(), body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Code != protocol.Success || !bytes.Equal(resp.Body, body) || resp.ExtFields["v"] != st.String() ||
				resp.SerializeType != st || !resp.IsResponse() {
				t.Fatalf("%v: response %v type %v ext %v", st, resp, resp.SerializeType, resp.ExtFields)
			}
		}
	}
}

// rawConn speaks frames by hand to check exactly what the server writes.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) send(c *protocol.Command) {
	r.t.Helper()
	b, err := protocol.EncodeFrame(c)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) read() (*protocol.Command, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	c, _, err := protocol.ReadFrame(r.nc, nil, 0)
	return c, err
}

func TestRemotingUnknownCodeAndOneway(t *testing.T) {
	var oneways atomic.Int32
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(7777, PoolDefault, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			oneways.Add(1)
			return protocol.NewResponse(protocol.Success, "must not be sent"), nil
		})
	})
	r := dialRaw(t, addr)
	// A one-way request (answered by its processor, but never written) and
	// a one-way unknown code, then a normal unknown code in ROCKETMQ form.
	ow := &protocol.Command{Code: 7777, Opaque: 1, Flag: protocol.FlagOneway}
	r.send(ow)
	r.send(&protocol.Command{Code: 4242, Opaque: 2, Flag: protocol.FlagOneway})
	r.send(&protocol.Command{Code: 4242, Opaque: 3, SerializeType: protocol.SerializeRocketMQ})
	resp, err := r.read()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Opaque != 3 || resp.Code != protocol.RequestCodeNotSupported || resp.Remark != " request type 4242 not supported" ||
		resp.SerializeType != protocol.SerializeRocketMQ {
		t.Fatalf("response %v type %v", resp, resp.SerializeType)
	}
	testutil.WaitFor(t, 10*time.Second, "oneway processed", func() bool { return oneways.Load() == 1 })
}

func TestRemotingSystemBusy(t *testing.T) {
	release := make(chan struct{})
	_, addr, _ := startServer(t, Options{SendPool: PoolOptions{Workers: 1, QueueSize: 1}}, func(s *Server) {
		s.RegisterFunc(protocol.SendMessage, PoolSend, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			<-release
			return protocol.NewResponse(protocol.Success, ""), nil
		})
	})
	c := newClient(t, ClientOptions{})
	type result struct {
		resp *protocol.Command
		err  error
	}
	results := make(chan result, 5)
	for i := 0; i < 5; i++ {
		err := c.InvokeAsync(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, nil), 5*time.Second,
			func(resp *protocol.Command, err error) { results <- result{resp, err} })
		if err != nil {
			t.Fatal(err)
		}
	}
	// One runs, one waits in the queue, three are rejected at once.
	for i := 0; i < 3; i++ {
		r := <-results
		if r.err != nil || r.resp.Code != protocol.SystemBusy || r.resp.Remark != protocol.RemarkSystemBusy {
			t.Fatalf("expected SYSTEM_BUSY, got %v %v", r.resp, r.err)
		}
	}
	// The other pools keep serving.
	if resp, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); err != nil || resp.Code != 0 {
		t.Fatalf("default pool blocked: %v %v", resp, err)
	}
	close(release)
	for i := 0; i < 2; i++ {
		if r := <-results; r.err != nil || r.resp.Code != protocol.Success {
			t.Fatalf("queued request: %v %v", r.resp, r.err)
		}
	}
}

func TestRemotingAsyncAnswerAndServerRequests(t *testing.T) {
	const codeHold, codeNotify int32 = 9001, 9002
	held := make(chan func(), 1)
	var serverSide atomic.Pointer[Conn]
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(codeHold, PoolPull, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			serverSide.Store(c)
			held <- func() { _ = c.WriteResponse(req, protocol.NewResponse(protocol.Success, "late")) }
			return nil, nil // answered later, like a held pull
		})
	})
	c := newClient(t, ClientOptions{})
	notified := make(chan string, 1)
	c.RegisterFunc(codeNotify, func(cn *Conn, req *protocol.Command) (*protocol.Command, error) {
		notified <- req.ExtFields["consumerGroup"]
		return protocol.NewResponse(protocol.Success, "client ok"), nil
	})
	done := make(chan *protocol.Command, 1)
	go func() {
		resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(codeHold, nil, nil))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	answer := <-held
	select {
	case <-done:
		t.Fatal("held request answered early")
	case <-time.After(50 * time.Millisecond):
	}
	// While the request is held, the server calls the client on the same
	// connection.
	sc := serverSide.Load()
	resp, err := sc.Invoke(context.Background(), protocol.NewRequest(codeNotify, &protocol.ConsumerGroupHeader{ConsumerGroup: "cg"}, nil))
	if err != nil || resp.Remark != "client ok" || <-notified != "cg" {
		t.Fatalf("server->client request: %v %v", resp, err)
	}
	if err := sc.Oneway(protocol.NewRequest(codeNotify, &protocol.ConsumerGroupHeader{ConsumerGroup: "cg2"}, nil)); err != nil {
		t.Fatal(err)
	}
	if g := <-notified; g != "cg2" {
		t.Fatalf("oneway notify got %q", g)
	}
	answer()
	if r := <-done; r == nil || r.Remark != "late" {
		t.Fatalf("late answer %v", r)
	}
}

func TestRemotingTimeoutCancelAndCloseHooks(t *testing.T) {
	block := make(chan struct{})
	held := make(chan struct{}, 2)
	closed := make(chan error, 4)
	// Four requests stay held at once: the admin pool gets a worker each.
	_, addr, _ := startServer(t, Options{AdminPool: PoolOptions{Workers: 4}}, func(s *Server) {
		s.RegisterFunc(9003, PoolAdmin, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			<-block
			return nil, errors.New("boom")
		})
		// 9005 is 9003 telling the test it holds the request.
		s.RegisterFunc(9005, PoolAdmin, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			held <- struct{}{}
			<-block
			return nil, errors.New("boom")
		})
		s.OnConnClose(func(c *Conn, err error) { closed <- err })
	})
	defer close(block)
	c := newClient(t, ClientOptions{ConnOptions: ConnOptions{RequestTimeout: 50 * time.Millisecond}})
	if _, err := c.Invoke(context.Background(), addr, protocol.NewRequest(9003, nil, nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want timeout, got %v", err)
	}
	// A call cancelled while the server holds it: a client whose timeout
	// cannot win the race with the cancel, even on a busy machine.
	c2 := newClient(t, ClientOptions{ConnOptions: ConnOptions{RequestTimeout: 10 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	if _, err := c2.Invoke(ctx, addr, protocol.NewRequest(9005, nil, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled, got %v", err)
	}
	errc := make(chan error, 1)
	if err := c.InvokeAsync(context.Background(), addr, protocol.NewRequest(9003, nil, nil), 30*time.Millisecond,
		func(_ *protocol.Command, err error) { errc <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrTimeout) {
		t.Fatalf("async want timeout, got %v", err)
	}
	// A pending call fails when its connection closes; the server's close
	// hook runs; the client reconnects on the next call.
	pend := make(chan error, 1)
	go func() {
		_, err := c2.Invoke(context.Background(), addr, protocol.NewRequest(9005, nil, nil))
		pend <- err
	}()
	<-held
	c2.CloseConn(addr)
	if err := <-pend; !errors.Is(err, ErrConnClosed) {
		t.Fatalf("pending call: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("server close hook did not run")
	}
	if resp, err := c2.Invoke(context.Background(), addr, echoReq("again", nil)); err != nil || resp.ExtFields["v"] != "again" {
		t.Fatalf("reconnect: %v %v", resp, err)
	}
}

func TestRemotingBodyBuffersAndRelease(t *testing.T) {
	var released atomic.Int32
	parts := [][]byte{bytes.Repeat([]byte("a"), 70<<10), []byte("bb"), bytes.Repeat([]byte("c"), 3)}
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(9004, PoolPull, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			resp := protocol.NewResponse(protocol.Success, "")
			resp.Body = []byte("head:")
			resp.BodyBuffers = parts
			resp.Release = func() { released.Add(1) }
			return resp, nil
		})
	})
	c := newClient(t, ClientOptions{})
	for i := 0; i < 3; i++ {
		resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(9004, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		want := append([]byte("head:"), bytes.Join(parts, nil)...)
		if !bytes.Equal(resp.Body, want) {
			t.Fatalf("body of %d bytes, want %d", len(resp.Body), len(want))
		}
	}
	testutil.WaitFor(t, 10*time.Second, "release callbacks", func() bool { return released.Load() == 3 })
}

func TestRemotingConcurrentCallers(t *testing.T) {
	_, addr, _ := startServer(t, Options{}, nil)
	c := newClient(t, ClientOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				v := fmt.Sprintf("%d-%d", g, i)
				body := bytes.Repeat([]byte{byte(g)}, i*37)
				var resp *protocol.Command
				var err error
				if i%3 == 0 {
					ch := make(chan struct{})
					var cbErr error
					if err = c.InvokeAsync(context.Background(), addr, echoReq(v, body), 0, func(r *protocol.Command, e error) {
						resp, cbErr = r, e
						close(ch)
					}); err == nil {
						<-ch
						err = cbErr
					}
				} else {
					resp, err = c.Invoke(context.Background(), addr, echoReq(v, body))
				}
				if err != nil || resp.ExtFields["v"] != v || !bytes.Equal(resp.Body, body) {
					errs <- fmt.Errorf("call %s: %v %v", v, resp, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Each bad input closes only the offending connection, with a log line
// naming the peer and the reason; other clients keep working.
func TestRemotingBadInput(t *testing.T) {
	_, addr, logs := startServer(t, Options{ConnOptions: ConnOptions{MaxFrameSize: 1 << 20, IdleTimeout: 2 * time.Second}}, nil)
	good := newClient(t, ClientOptions{})
	hdr := func(st byte, hl int) []byte { return []byte{st, byte(hl >> 16), byte(hl >> 8), byte(hl)} }
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	cases := []struct {
		name   string
		bytes  []byte
		reason string
	}{
		{"oversize frame", binary.BigEndian.AppendUint32(nil, 1<<20), "frame too large"},
		{"header longer than frame", frame(append(hdr(0, 100), `{}`...)), "header length 100 exceeds frame"},
		{"bad json", frame(append(hdr(0, 9), `{"code":}`...)), "malformed header"},
		{"unknown serialize type", frame(append(hdr(7, 2), `{}`...)), "unknown serialize type"},
		{"length below 4", []byte{0, 0, 0, 1, 0}, "malformed frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			if _, err := r.nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if _, err := r.read(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("connection not closed: %v", err)
			}
			peer := r.nc.LocalAddr().String()
			testutil.WaitFor(t, 10*time.Second, "log line", func() bool {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "peer="+peer) && strings.Contains(l, tc.reason) {
						return true
					}
				}
				return false
			})
			if resp, err := good.Invoke(context.Background(), addr, echoReq("still", nil)); err != nil || resp.ExtFields["v"] != "still" {
				t.Fatalf("server stopped serving others: %v %v", resp, err)
			}
		})
	}
	t.Run("slow loris", func(t *testing.T) {
		r := dialRaw(t, addr)
		valid, _ := protocol.EncodeFrame(echoReq("slow", nil))
		start := time.Now()
		var werr error
		for i := 0; i < len(valid) && werr == nil; i++ {
			_, werr = r.nc.Write(valid[i : i+1])
			time.Sleep(300 * time.Millisecond)
			// Cut off 2 s into the frame; trickled whole it would
			// take far longer (a byte per 300 ms).
			if time.Since(start) > 12*time.Second {
				t.Fatal("slow client never cut off")
			}
			if resp, err := good.Invoke(context.Background(), addr, echoReq("still", nil)); err != nil || resp.ExtFields["v"] != "still" {
				t.Fatalf("server stopped serving others: %v %v", resp, err)
			}
		}
		if werr == nil {
			if _, err := r.read(); err == nil {
				t.Fatal("trickled frame was answered")
			}
		}
		peer := r.nc.LocalAddr().String()
		testutil.WaitFor(t, 10*time.Second, "idle log line", func() bool {
			return strings.Contains(logs.String(), "peer="+peer) && strings.Contains(logs.String(), "frame not complete within 2s")
		})
	})
}

func TestRemotingIdleClose(t *testing.T) {
	closed := make(chan error, 1)
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{IdleTimeout: 100 * time.Millisecond}}, func(s *Server) {
		s.OnConnClose(func(c *Conn, err error) { closed <- err })
	})
	r := dialRaw(t, addr)
	select {
	case err := <-closed:
		if !errors.Is(err, ErrIdle) {
			t.Fatalf("close reason %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection not closed")
	}
	if _, err := r.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("read after idle close: %v", err)
	}
}

func TestRemotingCloseIdempotent(t *testing.T) {
	s, addr, _ := startServer(t, Options{}, nil)
	c := newClient(t, ClientOptions{})
	if _, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("invoke after close: %v", err)
	}
	if _, err := NewServer(Options{ConnOptions: ConnOptions{MaxFrameSize: -1}}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("bad options accepted: %v", err)
	}
}

// A peer that stops reading blocks senders once MaxWriteQueue bytes wait
// (backpressure), and is cut off after WriteTimeout; the blocked senders
// then fail instead of hanging.
func TestRemotingBackpressureAndWriteTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc // never read from
		}
	}()
	c := newClient(t, ClientOptions{ConnOptions: ConnOptions{MaxWriteQueue: 64 << 10, WriteTimeout: 300 * time.Millisecond}})
	cn, err := c.Conn(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	defer peer.Close()
	var created, released atomic.Int64
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for {
				req := protocol.NewRequest(codeEcho, nil, make([]byte, 32<<10))
				created.Add(1)
				req.Release = func() { released.Add(1) }
				if err := cn.Oneway(req); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrConnClosed) {
				t.Fatalf("sender error %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("senders blocked forever on a peer that does not read")
		}
	}
	if err := cn.Err(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("close reason %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "every release callback", func() bool { return released.Load() == created.Load() })
}

// TestRemotingClientOnAddrClose: the hook gets the address the closed
// connection was dialled at, once per connection, also for a connection
// dialled again after the first closed.
func TestRemotingClientOnAddrClose(t *testing.T) {
	s, addr, _ := startServer(t, Options{}, nil)
	c := newClient(t, ClientOptions{})
	closed := make(chan string, 4)
	c.OnAddrClose(func(a string, err error) {
		if err == nil {
			t.Error("close hook without a reason")
		}
		closed <- a
	})
	for range 2 {
		if _, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); err != nil {
			t.Fatal(err)
		}
		for _, cn := range s.Conns() {
			_ = cn.Close()
		}
		select {
		case got := <-closed:
			if got != addr {
				t.Fatalf("hook got %q, want the dialled %q", got, addr)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("hook not run on close")
		}
	}
	select {
	case got := <-closed:
		t.Fatalf("hook ran again (%q)", got)
	default:
	}
}
