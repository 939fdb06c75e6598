package statestore

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// slowConn yields between writes, as a busy machine does, so that two
// packets written without a lock interleave their buffers.
type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	return c.Conn.Write(p)
}

// TestStateStoreBufConnKeepsPacketsWhole writes SUBSCRIBEs and PINGREQs
// concurrently through the client's connection wrapper, the way paho's
// pinger and a Subscribe call do, and checks the server side reads only
// whole packets. Without the wrapper's Lock/Unlock the buffers of the two
// packets interleave and the stream is malformed.
func TestStateStoreBufConnKeepsPacketsWhole(t *testing.T) {
	srv, cli := net.Pipe()
	defer srv.Close()
	bc := &bufConn{Conn: slowConn{cli}, r: bufio.NewReader(cli)}
	const rounds = 50
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			s := &packets.Subscribe{PacketID: uint16(i + 1), Subscriptions: []packets.SubOptions{{Topic: "clients/watcher/response", QoS: 1}}}
			if _, err := s.WriteTo(bc); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			if _, err := (&packets.Pingreq{}).WriteTo(bc); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { wg.Wait(); _ = cli.Close() }()

	r := bufio.NewReader(srv)
	subs, pings := 0, 0
	for subs+pings < 2*rounds {
		cp, err := packets.ReadPacket(r)
		if err != nil {
			t.Fatalf("after %d subscribes and %d pings: %v", subs, pings, err)
		}
		switch p := cp.Content.(type) {
		case *packets.Subscribe:
			if len(p.Subscriptions) != 1 || p.Subscriptions[0].Topic != "clients/watcher/response" {
				t.Fatalf("subscribe %d mangled: %+v", subs, p.Subscriptions)
			}
			subs++
		case *packets.Pingreq:
			pings++
		default:
			t.Fatalf("unexpected packet type %d after %d subscribes and %d pings", cp.FixedHeader.Type, subs, pings)
		}
	}
}
