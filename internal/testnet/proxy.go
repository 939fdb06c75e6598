package testnet

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// RefusingProxy listens on listen and forwards every remoting frame to
// and from upstream, but answers each request of code itself with
// REQUEST_CODE_NOT_SUPPORTED, as a broker that predates that request
// does. It returns how many it refused. The listener and its connections
// close at the test's cleanup, which waits for their goroutines.
func RefusingProxy(t testing.TB, listen, upstream string, code int32) *atomic.Int64 {
	t.Helper()
	var refused atomic.Int64
	serve(t, listen, func(g *connGroup, down net.Conn) {
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			_ = down.Close()
			return
		}
		g.track(up)
		var wmu sync.Mutex // frames to down, from both directions
		writeDown := func(b []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			_, err := down.Write(b)
			return err
		}
		pipe := func(from io.Reader, to func([]byte) error, refuse bool) {
			defer down.Close()
			defer up.Close()
			var buf []byte
			for {
				cmd, b, err := protocol.ReadFrame(from, buf, 64<<20)
				buf = b
				if err != nil {
					return
				}
				if refuse && !cmd.IsResponse() && cmd.Code == code {
					refused.Add(1)
					resp := protocol.NewResponse(protocol.RequestCodeNotSupported, protocol.NotSupportedRemark(cmd.Code))
					resp.Opaque = cmd.Opaque
					frame, err := protocol.EncodeFrame(resp)
					if err != nil || writeDown(frame) != nil {
						return
					}
					continue
				}
				frame := make([]byte, 4+len(b))
				frame[0], frame[1], frame[2], frame[3] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
				copy(frame[4:], b)
				if to(frame) != nil {
					return
				}
			}
		}
		g.goOwned(func() { pipe(down, func(b []byte) error { _, err := up.Write(b); return err }, true) })
		g.goOwned(func() { pipe(up, writeDown, false) })
	})
	return &refused
}
