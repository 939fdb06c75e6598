package mqtt

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTHandleInlineAfterPausedInput: clients alternate a request
// larger than pauseInput to an inline handler (the state store's 3 MiB
// SET) with small ones, each sent, with the PUBACK of the previous
// answer, as soon as that answer came. The large one pauses the input;
// the worker reads the rest (resume) and handles it itself (workInline
// without a round). That unit gave the connection up and then released
// its output: the client's next packets, read by the poller meanwhile,
// made the poller's unit hold the same batch while the worker was still
// releasing it (a data race, then a panic with index out of range in
// outBatch.release that killed the server, or a connection whose output
// stayed held for good). Seen once in 20 runs of the Azure client's
// TestStateStoreAzureSDKValues under -race; afterUnhold widens the
// window here. Every request is answered.
func TestMQTTHandleInlineAfterPausedInput(t *testing.T) {
	widen := func() { time.Sleep(200 * time.Microsecond) }
	afterUnhold.Store(&widen)
	t.Cleanup(func() { afterUnhold.Store(nil) })
	s := startServer(t, nil).Server
	// The answer is the request's length: a short one, which the client
	// reads and answers at once.
	s.HandleInline("ireq", func(_ context.Context, from ClientInfo, msg *Message, _ func() func(error)) error {
		return s.SendTo(from.ClientID, &Message{Topic: "iresp", Payload: strconv.AppendInt(nil, int64(len(msg.Payload)), 10), QoS: 1})
	})
	addr := s.Addrs()[0].String()
	const clients, rounds = 4, 30
	big := strings.Repeat("b", 2*pauseInput)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		r := connected(t, addr, packets.Version5, fmt.Sprintf("paused-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pausedRequests(r, rounds, big)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pausedRequests sends rounds pairs of a big and a small request, each
// with the PUBACK of the previous response, after that request's PUBACK.
func pausedRequests(r *rawClient, rounds int, big string) error {
	var ack []byte // the PUBACK of the last response, sent with the next request
	id := uint16(0)
	for range rounds {
		for _, payload := range []string{big, "s"} {
			id++
			b, err := packets.AppendPacket(ack, inlineRequest(id, 1, payload), r.v)
			if err != nil {
				return err
			}
			if _, err := r.nc.Write(b); err != nil {
				return fmt.Errorf("request %d: %w", id, err)
			}
			ack = nil
			for _, want := range []string{"response", "PUBACK"} {
				p, err := r.next(10 * time.Second)
				if err != nil {
					return fmt.Errorf("request %d (%d bytes): %s: %w", id, len(payload), want, err)
				}
				switch p := p.(type) {
				case *packets.Publish:
					if want != "response" || string(p.Payload) != strconv.Itoa(len(payload)) {
						return fmt.Errorf("request %d: PUBLISH %q, want the %s", id, p.Payload, want)
					}
					ack, _ = packets.AppendPacket(nil, &packets.Puback{PacketID: p.PacketID}, r.v)
				case *packets.Puback:
					if want != "PUBACK" || p.PacketID != id {
						return fmt.Errorf("request %d: PUBACK %d, want the %s", id, p.PacketID, want)
					}
				default:
					return fmt.Errorf("request %d: %T, want the %s", id, p, want)
				}
			}
		}
	}
	return nil
}
