package remoting

import (
	"context"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A processor registered with TypedHeader gets its requests without the
// ExtFields map and decodes the header from the text; the same request to
// a processor without it gets the map. Both answer with the header
// written by WithHeader, which the client reads back as a map.
func TestRemotingTypedHeader(t *testing.T) {
	type seen struct {
		hadMap bool
		hdr    protocol.SendMessageRequestHeader
		same   bool // hdr == want while the processor ran
		err    error
	}
	want := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 2, BornTimestamp: 1764120000000, Properties: "WAIT\x01true\x02TAGS\x01t", Resend: true}
	got := make(chan seen, 2)
	proc := ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
		s := seen{hadMap: req.ExtFields != nil}
		s.err = protocol.DecodeSendHeader(req, &s.hdr)
		// A typed header's strings are valid until the request is
		// recycled, once this processor returned (NoRetain): compared
		// here, and shown afterwards only if they differed.
		s.same = s.hdr == want
		got <- s
		return protocol.NewResponse(protocol.Success, "").WithHeader(&protocol.SendMessageResponseHeader{
			MsgID: "id-" + s.hdr.Topic, QueueID: s.hdr.QueueID, QueueOffset: 7}), nil
	})
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterWith(protocol.SendMessage, PoolSend, proc, RegisterOptions{Inline: true, NoRetain: true, TypedHeader: true})
		s.RegisterWith(protocol.SendMessageV2, PoolSend, proc, RegisterOptions{NoRetain: true})
	})
	c := newClient(t, ClientOptions{})
	for _, tc := range []struct {
		req     *protocol.Command
		wantMap bool
	}{
		{protocol.NewRequest(protocol.SendMessage, &want, []byte("body")), false},
		{protocol.NewRequest(protocol.SendMessageV2, want.V2(), []byte("body")), true},
	} {
		resp, err := c.Invoke(context.Background(), addr, tc.req)
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("code %d: %v %v", tc.req.Code, resp, err)
		}
		var rh protocol.SendMessageResponseHeader
		if err := resp.DecodeHeader(&rh); err != nil || rh.MsgID != "id-T" || rh.QueueID != 2 || rh.QueueOffset != 7 {
			t.Fatalf("code %d: response header %+v %v (%v)", tc.req.Code, rh, err, resp.ExtFields)
		}
		s := <-got
		if s.err != nil || !s.same || s.hadMap != tc.wantMap {
			t.Fatalf("code %d: processor saw %+v (map %v) %v, want %+v (map %v)", tc.req.Code, s.hdr, s.hadMap, s.err, want, tc.wantMap)
		}
	}
}
