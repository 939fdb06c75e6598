package remoting

import (
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestRemotingRemoteAddrPort: a processor finds the peer's TCP address
// (the address the peer's socket is bound to) through RemoteAddrPort, on
// every request of the connection.
func TestRemotingRemoteAddrPort(t *testing.T) {
	const code = codeEcho + 7
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(code, PoolDefault, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			ap, ok := c.RemoteAddrPort()
			resp := protocol.NewResponse(protocol.Success, "")
			resp.ExtFields = protocol.ExtFields{"ap": ap.String(), "ok": strconv.FormatBool(ok), "remote": c.RemoteAddr().String()}
			return resp, nil
		})
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	var buf []byte
	for i := range 3 {
		req := protocol.NewRequest(code, nil, nil)
		req.Opaque = int32(i)
		f, err := protocol.EncodeFrame(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
		var resp *protocol.Command
		resp, buf, err = protocol.ReadFrame(nc, buf, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		want := nc.LocalAddr().String()
		if got := resp.ExtFields; got["ok"] != "true" || got["ap"] != want || got["remote"] != want {
			t.Fatalf("request %d: the server saw %v, want ok and %s", i, got, want)
		}
	}
}

// nopDispatcher serves nothing (a Conn made for a benchmark).
type nopDispatcher struct{}

func (nopDispatcher) dispatch(*Conn, *protocol.Command) {}
func (nopDispatcher) rawFields(int32) bool              { return false }

// BenchmarkRemotingPeerAddr: a send's born host, parsed from the socket's
// address at every send (as the broker did) and read once with the
// connection (RemoteAddrPort).
func BenchmarkRemotingPeerAddr(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	c := newConn(nc, ConnOptions{}, slog.Default(), nopDispatcher{})
	var sink netip.AddrPort
	b.Run("parsed", func(b *testing.B) {
		for b.Loop() {
			if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				ap := ta.AddrPort()
				sink = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			}
		}
	})
	b.Run("once", func(b *testing.B) {
		for b.Loop() {
			sink, _ = c.RemoteAddrPort()
		}
	})
	_ = sink
}
