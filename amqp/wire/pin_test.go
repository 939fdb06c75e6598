package wire

import (
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The byte strings in this file are written by hand from the AMQP 0-9-1
// grammar and RabbitMQ's table letters, not produced by this package's
// encoder: they pin the format.

// unhex decodes hex written with spaces, line breaks and # comments.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pinMethod checks that m encodes to exactly frame and that frame reads
// and decodes back to m.
func pinMethod(t *testing.T, m Method, channel uint16, frame string) {
	t.Helper()
	want := unhex(t, frame)
	if got := AppendMethodFrame(nil, channel, m); !bytes.Equal(got, want) {
		t.Errorf("%s encodes to\n% x\nwant\n% x", Name(m), got, want)
	}
	f, err := NewReader(bytes.NewReader(want), 0).ReadFrame()
	if err != nil {
		t.Fatalf("%s: %v", Name(m), err)
	}
	got, err := DecodeMethod(f.Payload)
	if err != nil {
		t.Fatalf("%s: %v", Name(m), err)
	}
	if f.Channel != channel || !reflect.DeepEqual(got, m) {
		t.Errorf("%s: channel %d, decoded %#v", Name(m), f.Channel, got)
	}
}

func TestPinProtocolHeaderAndHeartbeat(t *testing.T) {
	if !bytes.Equal(ProtocolHeader[:], unhex(t, "41 4d 51 50 00 00 09 01")) {
		t.Errorf("protocol header % x", ProtocolHeader)
	}
	if got := AppendHeartbeat(nil); !bytes.Equal(got, unhex(t, "08 0000 00000000 ce")) {
		t.Errorf("heartbeat % x", got)
	}
}

func TestPinConnectionStart(t *testing.T) {
	// connection.start as RabbitMQ sends it, cut to two server properties.
	pinMethod(t, &ConnectionStart{
		VersionMajor: 0, VersionMinor: 9,
		ServerProperties: Table{
			"capabilities": Table{"publisher_confirms": true},
			"product":      "RabbitMQ",
		},
		Mechanisms: "PLAIN AMQPLAIN",
		Locales:    "en_US",
	}, 0, `
		01 0000 00000061                   # method frame, channel 0, 97 bytes
		000a 000a                          # connection.start
		00 09                              # version 0-9
		0000003c                           # server-properties: 60 bytes
		  0c 6361706162696c6974696573 46   # "capabilities" F
		    00000015                       # 21 bytes
		    12 7075626c69736865725f636f6e6669726d73 74 01  # "publisher_confirms" t true
		  07 70726f64756374 53             # "product" S
		    00000008 5261626269744d51      # "RabbitMQ"
		0000000e 504c41494e20414d51504c41494e  # mechanisms "PLAIN AMQPLAIN"
		00000005 656e5f5553                # locales "en_US"
		ce`)
}

func TestPinConnectionHandshake(t *testing.T) {
	pinMethod(t, &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}, 0,
		"01 0000 0000000c  000a 001e  07ff 00020000 003c  ce")
	pinMethod(t, &ConnectionOpen{VirtualHost: "/"}, 0,
		"01 0000 00000008  000a 0028  01 2f  00  00  ce") // vhost, reserved capabilities, reserved insist bit
	pinMethod(t, &ConnectionOpenOk{}, 0, "01 0000 00000005  000a 0029  00  ce")
	pinMethod(t, &ConnectionClose{ReplyCode: NotAllowed, ReplyText: "no", FailingClassID: 20, FailingMethodID: 10}, 0,
		"01 0000 0000000d  000a 0032  0212 02 6e6f 0014 000a  ce")
	pinMethod(t, &ChannelOpenOk{}, 5, "01 0005 00000008  0014 000b  00000000  ce") // reserved longstr
	pinMethod(t, &BasicGetEmpty{}, 5, "01 0005 00000005  003c 0048  00  ce")
}

func TestPinBasicHotPath(t *testing.T) {
	pinMethod(t, &BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true}, 1,
		"01 0001 0000000d  003c 0028  0000  02 6578  02 726b  01  ce")
	pinMethod(t, &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 258, Redelivered: true, RoutingKey: "q"}, 1,
		"01 0001 00000015  003c 003c  04 63746167  0000000000000102  01  00  01 71  ce")
	pinMethod(t, &BasicAck{DeliveryTag: 5, Multiple: true}, 1,
		"01 0001 0000000d  003c 0050  0000000000000005  01  ce")
	pinMethod(t, &BasicNack{DeliveryTag: 7, Requeue: true}, 1,
		"01 0001 0000000d  003c 0078  0000000000000007  02  ce")
	pinMethod(t, &BasicConsume{Queue: "q", ConsumerTag: "t", NoAck: true, Exclusive: true}, 2,
		"01 0002 0000000f  003c 0014  0000  01 71  01 74  06  00000000  ce")
	pinMethod(t, &ConfirmSelect{NoWait: true}, 2, "01 0002 00000005  0055 000a  01  ce")
}

func TestPinQueueDeclare(t *testing.T) {
	pinMethod(t, &QueueDeclare{Queue: "q1", Durable: true, AutoDelete: true,
		Arguments: Table{"x-max-length": int32(10)}}, 3, `
		01 0003 00000020
		0032 000a  0000  02 7131
		0a                                    # durable (bit 1) and auto-delete (bit 3)
		00000012 0c 782d6d61782d6c656e677468 49 0000000a
		ce`)
	pinMethod(t, &ExchangeUnbind{Destination: "d", Source: "s", RoutingKey: "", NoWait: true}, 3,
		"01 0003 00000010  0028 0028  0000  01 64  01 73  00  01  00000000  ce")
}

func TestPinContentHeader(t *testing.T) {
	p := Properties{
		ContentType:  "text/plain",
		Headers:      Table{"k": "v"},
		DeliveryMode: 2,
		MessageID:    "m1",
		Timestamp:    time.Unix(1700000000, 0).UTC(),
	}
	frame := unhex(t, `
		02 0001 00000031                  # header frame, channel 1, 49 bytes
		003c 0000 0000000000000005        # basic, weight 0, body of 5 bytes
		b0c0                              # content-type, headers, delivery-mode, message-id, timestamp
		0a 746578742f706c61696e           # "text/plain"
		00000008 01 6b 53 00000001 76     # {"k": "v"}
		02                                # persistent
		02 6d31                           # "m1"
		000000006553f100                  # 1700000000
		ce`)
	raw, err := AppendProperties(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendContentHeaderFrame(nil, 1, 60, 5, raw); !bytes.Equal(got, frame) {
		t.Fatalf("encodes to\n% x\nwant\n% x", got, frame)
	}
	if n := ContentHeaderFrameSize(raw); n != len(frame) {
		t.Fatalf("ContentHeaderFrameSize %d, the frame has %d bytes", n, len(frame))
	}
	// No properties: a zero flag word, 22 bytes.
	if n, f := ContentHeaderFrameSize(nil), AppendContentHeaderFrame(nil, 1, 60, 0, nil); n != len(f) || n != 22 {
		t.Fatalf("ContentHeaderFrameSize(nil) %d, the frame has %d bytes, want 22", n, len(f))
	}
	f, err := NewReader(bytes.NewReader(frame), 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeContentHeader(f.Payload)
	if err != nil || h.ClassID != 60 || h.BodySize != 5 || !bytes.Equal(h.Raw, frame[19:len(frame)-1]) {
		t.Fatalf("header %+v, %v", h, err)
	}
	got, err := DecodeProperties(h.Raw)
	p.Flags = 0xb0c0
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("properties %#v, %v", got, err)
	}
}

// TestPinTableTypes pins each type letter: the bytes of a one-entry
// table {"k": value} decode to value, and value encodes to them.
func TestPinTableTypes(t *testing.T) {
	for _, c := range []struct {
		entry string // after the key 01 6b
		value any
	}{
		{"74 01", true},
		{"62 fe", int8(-2)},
		{"42 fe", uint8(254)},
		{"73 fed4", int16(-300)},
		{"75 fed4", uint16(65236)},
		{"49 ffffcfc7", int32(-12345)},
		{"69 ffffcfc7", uint32(4294954951)},
		{"6c fffffffffffffffe", int64(-2)},
		{"66 3fc00000", float32(1.5)},
		{"64 3fd0000000000000", 0.25},
		{"44 02 ffffcfc7", Decimal{Scale: 2, Value: -12345}},
		{"53 00000002 6869", "hi"},
		{"78 00000003 000102", []byte{0, 1, 2}},
		{"41 00000008 49 00000001 74 00 56", []any{int32(1), false, nil}},
		{"54 000000006553f100", time.Unix(1700000000, 0).UTC()},
		{"46 00000003 01 6a 56", Table{"j": nil}},
	} {
		entry := unhex(t, "01 6b "+c.entry)
		table := append(appendLong(nil, uint32(len(entry))), entry...)
		got, n, err := DecodeTable(table)
		if err != nil || n != len(table) {
			t.Errorf("%s: %v, %d bytes of %d", c.entry, err, n, len(table))
			continue
		}
		if v := got["k"]; !reflect.DeepEqual(v, c.value) && !(isNaN(v) && isNaN(c.value)) {
			t.Errorf("%s decodes to %#v, want %#v", c.entry, v, c.value)
		}
		enc, err := AppendTable(nil, Table{"k": c.value})
		if err != nil || !bytes.Equal(enc, table) {
			t.Errorf("%#v encodes to % x (%v), want % x", c.value, enc, err, table)
		}
	}
	// Keys are written sorted, so a table always encodes the same.
	enc, _ := AppendTable(nil, Table{"b": nil, "a": nil, "c": nil})
	if want := unhex(t, "00000009 01 61 56 01 62 56 01 63 56"); !bytes.Equal(enc, want) {
		t.Errorf("three keys encode to % x, want % x", enc, want)
	}
}

func isNaN(v any) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }

// TestAsInt64 reads x-max-length = 10 as each client writes it.
func TestAsInt64(t *testing.T) {
	for _, entry := range []string{"62 0a", "42 0a", "73 000a", "75 000a", "49 0000000a", "69 0000000a", "6c 000000000000000a"} {
		b := unhex(t, "0000000f 0c 782d6d61782d6c656e677468 "+entry)
		b = append(appendLong(nil, uint32(len(b)-4)), b[4:]...)
		tb, _, err := DecodeTable(b)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		if n, ok := AsInt64(tb["x-max-length"]); !ok || n != 10 {
			t.Errorf("%s: %d, %v", entry, n, ok)
		}
	}
	for _, v := range []any{"10", 10.0, nil, true, uint64(math.MaxInt64) + 1} {
		if _, ok := AsInt64(v); ok {
			t.Errorf("%#v read as an integer", v)
		}
	}
	// The Go integers AppendTable takes (an argument table built in the
	// process, not decoded).
	for _, v := range []any{10, uint64(10)} {
		if n, ok := AsInt64(v); !ok || n != 10 {
			t.Errorf("%#v: %d, %v", v, n, ok)
		}
	}
}
