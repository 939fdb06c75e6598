package mqtt

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// countRecycler counts the messages given back (Recycler).
type countRecycler struct{ n atomic.Int32 }

func (c *countRecycler) Recycle(*Message) { c.n.Add(1) }

// roundSend is a RoundHook that sends msg to clientID through its round.
type roundSend struct {
	r        *Round
	clientID string
	msg      *Message
	rec      Recycler
	t        *testing.T
}

func (h *roundSend) RoundEnd() {
	if err := h.r.SendToRecycled(h.clientID, h.msg, h.rec); err != nil {
		h.t.Error(err)
	}
}

// TestMQTTRoundSendToRecycled: an inline handler answers through its
// round (Round.SendToRecycled) the client whose request it serves, another
// client, and, from a hook deferred to the round's end, the requester
// again; every answer arrives with the Message Expiry Interval the request
// carried (the round's clock reading is the one the request's expiry was
// computed from), each is recycled once its client acknowledged it, and a
// client without a session is refused as by Server.SendToRecycled.
func TestMQTTRoundSendToRecycled(t *testing.T) {
	s := startServer(t, nil).Server
	addr := s.Addrs()[0].String()
	var rec countRecycler
	var onRound atomic.Int32
	s.HandleInline("rreq", func(ctx context.Context, from ClientInfo, msg *Message, _ func() func(error)) error {
		answer := func(topic string) *Message {
			return &Message{Topic: topic, Payload: []byte(strings.Clone(string(msg.Payload))), QoS: 1, Expiry: msg.Expiry}
		}
		r := RoundOf(ctx)
		if r == nil { // a worker's call (the first requests after CONNECT)
			if err := s.SendToRecycled(from.ClientID, answer("rresp"), &rec); err != nil {
				t.Error(err)
			}
			return nil
		}
		onRound.Add(1)
		if err := r.SendToRecycled(from.ClientID, answer("rresp"), &rec); err != nil {
			t.Error(err)
		}
		if err := r.SendToRecycled("rround-other", answer("rother"), &rec); err != nil {
			t.Error(err)
		}
		if err := r.SendToRecycled("rround-nobody", answer("rother"), &rec); !errors.Is(err, ErrNoSession) {
			t.Errorf("send to a client without a session: %v, want ErrNoSession", err)
		}
		r.Defer(&roundSend{r: r, clientID: from.ClientID, msg: answer("rlate"), rec: &rec, t: t})
		return nil
	})
	other := connected(t, addr, packets.Version5, "rround-other")
	c := connected(t, addr, packets.Version5, "rround-req")
	request := func(id uint16) {
		p := &packets.Publish{QoS: 1, PacketID: id, Topic: "rreq", Payload: []byte{'a' + byte(id%26)}}
		p.Properties.Present.Add(packets.PropMessageExpiry)
		p.Properties.MessageExpiry = 60
		c.send(p)
	}
	// An answer sent through the round has exactly the request's 60 s
	// (one clock reading); one sent by a worker (Server.SendToRecycled)
	// reads the clock again, and a stall of a second between the
	// request's receipt and its answer (a loaded -race run) makes it 59.
	check := func(p *packets.Publish, topic string, id uint16, onRound bool) {
		t.Helper()
		exp := p.Properties.MessageExpiry
		if p.Topic != topic || string(p.Payload) != string([]byte{'a' + byte(id%26)}) ||
			!p.Properties.Present.Has(packets.PropMessageExpiry) || exp > 60 || exp < 59 || onRound && exp != 60 {
			t.Fatalf("answer to request %d: topic %q payload %q expiry %v/%d, want %q and 60 s", id, p.Topic, p.Payload,
				p.Properties.Present.Has(packets.PropMessageExpiry), p.Properties.MessageExpiry, topic)
		}
	}
	sent := int32(0)
	for id := uint16(1); ; id++ {
		if id == 40 {
			t.Fatal("no request of 39 handled on the poller")
		}
		before := onRound.Load()
		request(id)
		// The answer, the PUBACK and (on a round) the late answer, in
		// the round's one write: the answer first.
		var got []*packets.Publish
		acked := false
		want := 1
		for len(got) < want || !acked {
			switch p := c.recv().(type) {
			case *packets.Publish:
				got = append(got, p)
			case *packets.Puback:
				if p.PacketID != id {
					t.Fatalf("PUBACK %d, want %d", p.PacketID, id)
				}
				acked = true
				if onRound.Load() > before {
					want = 2
				}
			default:
				t.Fatalf("unexpected %T", p)
			}
		}
		check(got[0], "rresp", id, onRound.Load() > before)
		for _, p := range got {
			c.send(&packets.Puback{PacketID: p.PacketID})
		}
		sent += int32(len(got))
		if onRound.Load() == before {
			continue
		}
		check(got[1], "rlate", id, true)
		p := other.expectPublish()
		check(p, "rother", id, true)
		other.send(&packets.Puback{PacketID: p.PacketID})
		sent++
		break
	}
	if t.Failed() {
		return
	}
	testutil.WaitFor(t, 10*time.Second, "every answer recycled after its PUBACK", func() bool { return rec.n.Load() == sent })
}
