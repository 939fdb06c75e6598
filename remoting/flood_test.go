package remoting

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A peer flooding the server with connections that each send a bad frame
// gets its connections closed, but the log stays bounded: one line for the
// reason per interval, not one per connection.
func TestRemotingBadPeerFloodLogsBounded(t *testing.T) {
	s, addr, logs := startServer(t, Options{ConnOptions: ConnOptions{MaxFrameSize: 1 << 20}}, nil)
	const conns = 300
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, 1<<30)); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		if _, err := nc.Read(b[:]); err == nil {
			t.Fatal("connection with an oversize frame not closed")
		}
		nc.Close()
	}
	testutil.WaitFor(t, 5*time.Second, "all connections closed", func() bool { return len(s.Conns()) == 0 })
	lines := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "closing connection") {
			lines++
		}
	}
	if lines != 1 {
		t.Fatalf("%d 'closing connection' lines for %d bad connections, want 1:\n%s", lines, conns, logs.String())
	}
}
