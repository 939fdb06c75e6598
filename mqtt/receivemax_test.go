package mqtt

import (
	"crypto/tls"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTReceiveMaximumPipelinedQoS2: a client that sends receive
// maximum + 1 QoS 2 PUBLISHes back to back without reading, and so without
// a single PUBREL, is disconnected with 0x93 even while the backend is
// still storing most of them (they count as much as stored ones). The
// close is graceful: the client reads the DISCONNECT and then an end of
// stream, not a reset, although it kept sending after the violation.
func TestMQTTReceiveMaximumPipelinedQoS2(t *testing.T) {
	const recvMax = 1024
	hb, addr := startHeld(t, recvMax)
	r := connected(t, addr, v5, "pipelined")
	var burst []byte
	for i := 1; i <= recvMax+1; i++ {
		b, err := packets.AppendPacket(nil, &packets.Publish{QoS: 2, PacketID: uint16(i), Topic: "rm/t", Payload: []byte("x")}, v5)
		if err != nil {
			t.Fatal(err)
		}
		burst = append(burst, b...)
	}
	// After the violation the client goes on writing (QoS 0 PUBLISHes,
	// more than the server buffers while its worker is parked), so
	// input is in flight when the server closes.
	filler, err := packets.AppendPacket(nil, &packets.Publish{Topic: "rm/f", Payload: make([]byte, 16<<10)}, v5)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := r.nc.Write(burst); err != nil {
			return
		}
		for range 64 { // 1 MiB
			if _, err := r.nc.Write(filler); err != nil {
				return
			}
		}
	}()
	t.Cleanup(wg.Wait)
	testutil.WaitFor(t, 10*time.Second, "the receive maximum of stores in flight", func() bool { return hb.count() == recvMax })
	// One store completes: its PUBREC goes out and the worker resumes
	// with 1,023 messages still being stored.
	hb.release([]int{0}, nil)
	if a, ok := r.recv().(*packets.Pubrec); !ok || a.PacketID != 1 || a.ReasonCode != 0 {
		t.Fatalf("want PUBREC 1, got %+v", a)
	}
	p, err := r.next(10 * time.Second)
	if err != nil {
		t.Fatalf("no DISCONNECT after %d unreleased QoS 2 PUBLISHes: %v", recvMax+1, err)
	}
	if d, ok := p.(*packets.Disconnect); !ok || d.ReasonCode != packets.ReasonReceiveMaximumExceeded {
		t.Fatalf("want DISCONNECT 0x93, got %T %+v", p, p)
	}
	if p, err := r.next(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after the DISCONNECT: %T %v, want an orderly end of stream (no reset)", p, err)
	}
	if n := hb.count(); n != recvMax {
		t.Fatalf("%d publishes reached the backend, want %d", n, recvMax)
	}
}

// TestMQTTGracefulCloseTLS: the lingering close over TLS (CloseWrite by
// the writer, the reader drains and closes): a client closed for a
// protocol error while it keeps sending reads the DISCONNECT and then an
// orderly end of stream, and the server's Close does not wait for the
// linger. (TLS's close_notify reaches the client ahead of any reset, so
// unlike plain TCP the old immediate close passed this too.)
func TestMQTTGracefulCloseTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	ts := startServer(t, func(o *Options) {
		o.TLSListen = []string{"127.0.0.1:0"}
		o.TLSCertFile, o.TLSKeyFile = cert, key
	})
	nc, err := tls.Dial("tcp", ts.Addrs()[1].String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	r := wrapRaw(t, nc, v5)
	r.connect(&packets.Connect{ClientID: "tls-violator", CleanStart: true, KeepAlive: 60})
	second, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: "again", CleanStart: true}, v5)
	filler, _ := packets.AppendPacket(nil, &packets.Publish{Topic: "f", Payload: make([]byte, 16<<10)}, v5)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := nc.Write(second); err != nil {
			return
		}
		for range 64 {
			if _, err := nc.Write(filler); err != nil {
				return
			}
		}
	}()
	t.Cleanup(wg.Wait)
	p, err := r.next(10 * time.Second)
	if d, ok := p.(*packets.Disconnect); err != nil || !ok || d.ReasonCode != packets.ReasonProtocolError {
		t.Fatalf("want DISCONNECT 0x82, got %T %+v %v", p, p, err)
	}
	if _, err := r.next(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after the DISCONNECT: %v, want an orderly end of stream", err)
	}
	nc.Close()
	start := time.Now()
	ts.Close()
	if d := time.Since(start); d > closeLinger {
		t.Fatalf("Close took %v", d)
	}
}
