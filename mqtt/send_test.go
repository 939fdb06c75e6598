package mqtt

import (
	"bytes"
	"testing"

	"github.com/smartgo/smartgo/mqtt/packets"
	"golang.org/x/sys/unix"
)

// TestMQTTSendHeldOutput: a PUBLISH sent to a held connection is encoded
// into its held output and leaves only when the hold ends; one over
// holdMax leaves at once with what was held before it, in order, and
// leaves no array behind.
func TestMQTTSendHeldOutput(t *testing.T) {
	s, c, peer := socketConn(t, 4096)
	read := func() []byte {
		buf := make([]byte, 64<<10)
		n, _ := unix.Read(peer, buf)
		return buf[:max(n, 0)]
	}
	encode := func(p *packets.Publish) []byte {
		b, err := packets.AppendPublish(nil, p, packets.Version5)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	small := &packets.Publish{QoS: 1, PacketID: 1, Topic: "a/b", Payload: []byte("small")}
	big := &packets.Publish{QoS: 1, PacketID: 2, Topic: "a/b", Payload: bytes.Repeat([]byte("x"), s.holdMax)}

	var fl outBatch
	fl.hold(c)
	if ok, _ := c.sendPublish(small, nil); !ok {
		t.Fatal("small not sent")
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("held output left early: %d bytes", len(got))
	}
	if ok, _ := c.sendPublish(big, nil); !ok {
		t.Fatal("big not sent")
	}
	want := append(encode(small), encode(big)...)
	if got := read(); !bytes.Equal(got, want) {
		t.Fatalf("over holdMax: read %d bytes, want the held packet then the big one (%d bytes)", len(got), len(want))
	}
	if c.out != nil {
		t.Fatalf("output keeps an array of %d bytes after it was written", cap(c.out))
	}
	if ok, _ := c.sendPublish(small, nil); !ok {
		t.Fatal("small not sent")
	}
	fl.release()
	if got := read(); !bytes.Equal(got, encode(small)) {
		t.Fatalf("at release: read %x, want %x", got, encode(small))
	}

	// Over holdMax into an empty held output: written at once, no array kept.
	fl.hold(c)
	if ok, _ := c.sendPublish(big, nil); !ok {
		t.Fatal("big not sent")
	}
	if got := read(); !bytes.Equal(got, encode(big)) {
		t.Fatalf("big alone: read %d bytes, want %d", len(got), len(encode(big)))
	}
	if c.out != nil {
		t.Fatalf("output keeps an array of %d bytes", cap(c.out))
	}
	fl.release()
}

// socketConn returns a server (not started; MaxOutbound maxOut, 0 for
// the default) and an MQTT 5 connection of it over one end of a
// non-blocking socket pair, and the other end's descriptor.
func socketConn(t testing.TB, maxOut int) (*Server, *conn, int) {
	s, err := NewServer(Options{Listen: []string{"127.0.0.1:0"}, MaxOutbound: maxOut}, NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	c := s.newConn("test")
	c.fd, c.version = fds[0], packets.Version5
	return s, c, fds[1]
}
