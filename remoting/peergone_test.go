package remoting

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestRemotingPeerResetKeepsRequestsItSent: a client writes oneway
// requests (rocketmq-client-go's Shutdown commits its offsets so) and
// resets its connection (a close with an answer it never read) while a
// request of its own is still to be answered (a held pull). The server's
// answer then fails to write. The requests the client wrote before its
// reset are in the server's socket, not read yet: they must still be
// served. Before, the failed write closed the socket and dropped them.
func TestRemotingPeerResetKeepsRequestsItSent(t *testing.T) {
	const codeHeld, codeNote int32 = 9101, 9102
	const notes = 8
	var got atomic.Int32
	release, gate, inFirst := make(chan struct{}), make(chan struct{}), make(chan struct{})
	_, addr, logs := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(codeHeld, PoolDefault, func(*Conn, *protocol.Command) (*protocol.Command, error) {
			<-release
			return protocol.NewResponse(protocol.Success, ""), nil
		})
		s.RegisterInline(codeNote, PoolDefault, ProcessorFunc(func(*Conn, *protocol.Command) (*protocol.Command, error) {
			if got.Add(1) == 1 {
				close(inFirst)
				<-gate // the reader is held here: what follows waits in the socket
			}
			return nil, nil
		}))
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(code, opaque int32, oneway bool) []byte {
		cmd := protocol.NewRequest(code, nil, nil)
		cmd.Opaque = opaque
		if oneway {
			cmd.MarkOneway()
		}
		f, err := protocol.EncodeFrame(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if _, err := nc.Write(append(frame(codeHeld, 1, false), frame(codeNote, 2, true)...)); err != nil {
		t.Fatal(err)
	}
	<-inFirst
	var rest []byte
	for i := range int32(notes - 1) {
		rest = append(rest, frame(codeNote, 3+i, true)...)
	}
	if _, err := nc.Write(rest); err != nil {
		t.Fatal(err)
	}
	// On loopback the rest is in the server's socket once Write returns.
	_ = nc.(*net.TCPConn).SetLinger(0) // the close resets the connection
	_ = nc.Close()
	close(release)
	// The held answer's write fails on the reset connection.
	testutil.WaitFor(t, 10*time.Second, "the held answer's write to fail", func() bool {
		l := logs.String()
		return strings.Contains(l, "write to") && (strings.Contains(l, "reset by peer") || strings.Contains(l, "broken pipe"))
	})
	close(gate)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := got.Load(); n != notes {
			return fmt.Errorf("%d of %d oneway requests served", n, notes)
		}
		return nil
	})
}
