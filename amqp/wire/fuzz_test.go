package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// seedFrames are whole frames from the pinned tests and the round trips:
// the fuzzers start from them.
func seedFrames(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for _, m := range []Method{
		&ConnectionStart{VersionMinor: 9, ServerProperties: everyType(), Mechanisms: "PLAIN", Locales: "en_US"},
		&ConnectionStartOk{ClientProperties: Table{"product": "x"}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"},
		&ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
		&ConnectionOpen{VirtualHost: "/"},
		&ConnectionClose{ReplyCode: NotFound, ReplyText: "no", FailingClassID: 50, FailingMethodID: 10},
		&ChannelOpen{}, &ChannelFlow{Active: true},
		&ExchangeDeclare{Exchange: "e", Type: "topic", Durable: true, Arguments: Table{"alternate-exchange": "ae"}},
		&ExchangeBind{Destination: "d", Source: "s", RoutingKey: "#"},
		&QueueDeclare{Queue: "q", Exclusive: true, Arguments: Table{"x-message-ttl": int32(1000)}},
		&QueueDeclareOk{Queue: "amq.gen-1", MessageCount: 3},
		&QueueBind{Queue: "q", Exchange: "e", RoutingKey: "a.*"},
		&BasicQos{PrefetchCount: 10},
		&BasicConsume{Queue: "q", ConsumerTag: "c", Arguments: Table{"x-priority": int32(1)}},
		&BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true},
		&BasicDeliver{ConsumerTag: "c", DeliveryTag: 1, Exchange: "ex", RoutingKey: "rk"},
		&BasicAck{DeliveryTag: 5, Multiple: true},
		&BasicNack{DeliveryTag: 7, Requeue: true},
		&ConfirmSelect{}, &TxSelect{},
	} {
		out = append(out, AppendMethodFrame(nil, 1, m))
	}
	raw, err := AppendProperties(nil, Properties{ContentType: "text/plain", Headers: everyType(), DeliveryMode: 2, MessageID: "m"})
	if err != nil {
		f.Fatal(err)
	}
	out = append(out, AppendContentHeaderFrame(nil, 1, 60, 3, raw))
	out = append(out, AppendFrame(nil, FrameBody, 1, []byte("abc")), AppendHeartbeat(nil))
	return out
}

// payloadOf is the payload of a whole frame.
func payloadOf(frame []byte) []byte { return frame[7 : len(frame)-1] }

// FuzzDecodeMethod: any payload decodes to a method or an error, without
// panicking; a decoded method encodes to arguments that decode to a
// method encoding to the same bytes again.
func FuzzDecodeMethod(f *testing.F) {
	for _, fr := range seedFrames(f) {
		if fr[0] == FrameMethod {
			f.Add(payloadOf(fr))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMethod(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownMethod) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrUnknownMethod", err)
			}
			return
		}
		once := AppendMethodPayload(nil, m)
		m2, err := DecodeMethod(once)
		if err != nil {
			t.Fatalf("%s re-encoded as % x does not decode: %v", Name(m), once, err)
		}
		if twice := AppendMethodPayload(nil, m2); !bytes.Equal(once, twice) {
			t.Fatalf("%s: encodes to % x, then % x", Name(m), once, twice)
		}
	})
}

// FuzzDecodeTable: any bytes decode to a table or ErrMalformed; the
// structure check agrees with the decoder; a decoded table encodes to
// bytes that decode and encode to the same bytes.
func FuzzDecodeTable(f *testing.F) {
	for _, tb := range []Table{everyType(), nil, {"a": []any{Table{"b": []byte{1}}}}} {
		b, err := AppendTable(nil, tb)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, n, err := DecodeTable(b)
		sn, serr := skipTable(b, 0)
		if (err == nil) != (serr == nil) || sn != n {
			t.Fatalf("DecodeTable: %d, %v; skipTable: %d, %v", n, err, sn, serr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		once, err := AppendTable(nil, tb)
		if err != nil {
			t.Fatalf("decoded table does not encode: %v", err)
		}
		tb2, n2, err := DecodeTable(once)
		if err != nil || n2 != len(once) {
			t.Fatalf("re-encoded table: %d of %d bytes, %v", n2, len(once), err)
		}
		if twice, _ := AppendTable(nil, tb2); !bytes.Equal(once, twice) {
			t.Fatalf("encodes to % x, then % x", once, twice)
		}
	})
}

// FuzzDecodeContentHeader: the structure check of DecodeContentHeader
// and DecodeProperties agree, and decoded properties re-encode to bytes
// that decode and encode the same.
func FuzzDecodeContentHeader(f *testing.F) {
	for _, fr := range seedFrames(f) {
		if fr[0] == FrameHeader {
			f.Add(payloadOf(fr))
		}
	}
	f.Add(unhex(f, "003c 0000 0000000000000000 8001 0000 02 6869"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeContentHeader(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			if len(b) >= contentHeaderFixed+2 {
				if _, perr := DecodeProperties(b[contentHeaderFixed:]); perr == nil {
					t.Fatalf("DecodeContentHeader refused (%v) what DecodeProperties decodes", err)
				}
			}
			return
		}
		p, err := DecodeProperties(h.Raw)
		if err != nil {
			t.Fatalf("DecodeContentHeader accepted what DecodeProperties refuses: %v", err)
		}
		once, err := AppendProperties(nil, p)
		if err != nil {
			t.Fatalf("decoded properties do not encode: %v", err)
		}
		p2, err := DecodeProperties(once)
		if err != nil {
			t.Fatalf("re-encoded properties % x: %v", once, err)
		}
		if twice, _ := AppendProperties(nil, p2); !bytes.Equal(once, twice) {
			t.Fatalf("encodes to % x, then % x", once, twice)
		}
		frame := AppendContentHeaderFrame(nil, 1, h.ClassID, h.BodySize, h.Raw)
		if h2, err := DecodeContentHeader(payloadOf(frame)); err != nil || h2.BodySize != h.BodySize || !bytes.Equal(h2.Raw, h.Raw) {
			t.Fatalf("forwarded header: %+v, %v", h2, err)
		}
	})
}

// FuzzReadFrame: any stream reads as frames and then an error, never a
// panic or a frame over the limit; the frames read, written again, are
// the bytes they came from.
func FuzzReadFrame(f *testing.F) {
	var all []byte
	for _, fr := range seedFrames(f) {
		f.Add(fr)
		all = append(all, fr...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), 0)
		var again []byte
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				if err == io.EOF && len(again) != len(b) {
					t.Fatalf("io.EOF after %d of %d bytes", len(again), len(b))
				}
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrBadFrameEnd) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(fr.Payload)+8 > FrameMinSize {
				t.Fatalf("frame of %d bytes over the limit", len(fr.Payload)+8)
			}
			again = AppendFrame(again, fr.Type, fr.Channel, fr.Payload)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatal("frames written again differ from the input")
		}
	})
}
