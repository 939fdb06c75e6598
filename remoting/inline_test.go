package remoting

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// onReader reports whether the caller runs on a connection's reader
// goroutine (its stack goes through readLoop).
func onReader() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*Conn).readLoop") {
			return true
		}
		if !more {
			return false
		}
	}
}

// Inline processors run on the reader whatever their pool is doing; a
// panic is answered SYSTEM_ERROR; one that blocks holds up its own
// connection only.
func TestRemotingInlineDispatch(t *testing.T) {
	release := make(chan struct{})
	started := make(chan bool, 8)
	_, addr, _ := startServer(t, Options{SendPool: PoolOptions{Workers: 1, QueueSize: 1}}, func(s *Server) {
		s.RegisterInline(protocol.SendMessage, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			switch string(req.Body) {
			case "block":
				started <- onReader()
				<-release
			case "panic":
				panic("boom")
			case "where":
				resp := protocol.NewResponse(protocol.Success, "")
				if onReader() {
					resp.Remark = "reader"
				}
				return resp, nil
			}
			return protocol.NewResponse(protocol.Success, ""), nil
		}))
	})
	a := newClient(t, ClientOptions{})
	b := newClient(t, ClientOptions{})
	send := func(c *Client, body string) (*protocol.Command, error) {
		return c.Invoke(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte(body)))
	}
	if resp, err := send(a, "where"); err != nil || resp.Code != protocol.Success || resp.Remark != "reader" {
		t.Fatalf("inline: %v %v", resp, err)
	}
	// A panic is answered SYSTEM_ERROR and the connection keeps serving.
	if resp, err := send(a, "panic"); err != nil || resp.Code != protocol.SystemError {
		t.Fatalf("panic: %v %v", resp, err)
	}
	if resp, err := send(a, "x"); err != nil || resp.Code != protocol.Success {
		t.Fatalf("after panic: %v %v", resp, err)
	}
	done := make(chan *protocol.Command, 1)
	err := a.InvokeAsync(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("block")), 10*time.Second,
		func(resp *protocol.Command, err error) { done <- resp })
	if err != nil {
		t.Fatal(err)
	}
	if !<-started {
		t.Fatal("inline request did not run on the reader")
	}
	// a's reader is blocked; b's connection is served, inline, at once.
	for i := 0; i < 3; i++ {
		if resp, err := send(b, "where"); err != nil || resp.Remark != "reader" {
			t.Fatalf("other connection behind a blocked reader: %v %v", resp, err)
		}
	}
	close(release)
	if r := <-done; r == nil || r.Code != protocol.Success {
		t.Fatalf("blocked request: %v", r)
	}
}

func TestRemotingInlinePipelined(t *testing.T) {
	var served atomic.Int32
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterInline(codeEcho+1, PoolDefault, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			served.Add(1)
			return echo(c, req)
		}))
	})
	// Many requests in one write: the reader serves them back to back and
	// must answer every one, in order, before it blocks reading again.
	const n = 300
	var all []byte
	for i := 1; i <= n; i++ {
		req := protocol.NewRequest(codeEcho+1, nil, []byte(strconv.Itoa(i)))
		req.Opaque = int32(i)
		req.ExtFields = protocol.ExtFields{"v": strconv.Itoa(i)}
		if i%50 == 0 {
			req.MarkOneway() // never answered
		}
		b, err := protocol.EncodeFrame(req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	r := dialRaw(t, addr)
	if _, err := r.nc.Write(all); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if i%50 == 0 {
			continue
		}
		resp, err := r.read()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if resp.Opaque != int32(i) || !resp.IsResponse() || string(resp.Body) != strconv.Itoa(i) || resp.ExtFields["v"] != strconv.Itoa(i) {
			t.Fatalf("response %d: %v %q %v", i, resp, resp.Body, resp.ExtFields)
		}
	}
	if got := served.Load(); got != n {
		t.Fatalf("served %d of %d", got, n)
	}

	// A whole request followed by part of the next: the first is answered
	// while the reader waits for the rest.
	frame := func(i int) []byte {
		req := protocol.NewRequest(codeEcho+1, nil, make([]byte, 1000))
		req.Opaque = int32(i)
		b, err := protocol.EncodeFrame(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := frame(1001), frame(1002)
	if _, err := r.nc.Write(append(a, b[:len(b)/2]...)); err != nil {
		t.Fatal(err)
	}
	if resp, err := r.read(); err != nil || resp.Opaque != 1001 {
		t.Fatalf("answer before the next frame is complete: %v %v", resp, err)
	}
	if _, err := r.nc.Write(b[len(b)/2:]); err != nil {
		t.Fatal(err)
	}
	if resp, err := r.read(); err != nil || resp.Opaque != 1002 {
		t.Fatalf("second answer: %v %v", resp, err)
	}
}
