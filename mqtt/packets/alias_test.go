package packets

import (
	"bytes"
	"reflect"
	"testing"
)

func v5Publish() *Publish {
	p := &Publish{QoS: 1, Topic: "devices/42/telemetry", PacketID: 7, Payload: bytes.Repeat([]byte("x"), 128)}
	p.Properties.Present = setOf(PropMessageExpiry, PropContentType, PropResponseTopic, PropCorrelationData)
	p.Properties.MessageExpiry = 3600
	p.Properties.ContentType = "application/json"
	p.Properties.ResponseTopic = "devices/42/reply"
	p.Properties.CorrelationData = []byte("req-1")
	p.Properties.User = []UserProperty{{"tenant", "acme"}, {"trace", "abc"}}
	return p
}

// TestMQTTPacketsAliasAndDetach checks zero-copy decoding: with Alias the
// packet follows changes to the input buffer; after Detach, or with the
// default copying decoder, it does not.
func TestMQTTPacketsAliasAndDetach(t *testing.T) {
	want := v5Publish()
	b, err := AppendPacket(nil, want, Version5)
	if err != nil {
		t.Fatal(err)
	}
	alias, _ := NewDecoder(Options{Alias: true})

	buf := bytes.Clone(b)
	aliased, err := alias.Decode(Version5, buf)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := Decode(Version5, buf)
	if err != nil {
		t.Fatal(err)
	}
	detached, err := alias.Decode(Version5, buf)
	if err != nil {
		t.Fatal(err)
	}
	Detach(detached)
	for i := range buf {
		buf[i] = 'Z'
	}
	if ap := aliased.(*Publish); ap.Topic == want.Topic || ap.Payload[0] != 'Z' || ap.Properties.User[0].Key == "tenant" {
		t.Fatalf("aliased packet did not follow the buffer: %q", ap.Topic)
	}
	if !reflect.DeepEqual(copied, want) {
		t.Fatalf("copied packet changed with the buffer: %+v", copied)
	}
	if !reflect.DeepEqual(detached, want) {
		t.Fatalf("detached packet changed with the buffer: %+v", detached)
	}
}

// TestMQTTPacketsAliasCapacityClipped checks that appending to an aliased
// payload cannot overwrite the next packet in the read buffer.
func TestMQTTPacketsAliasCapacityClipped(t *testing.T) {
	stream, _ := AppendPacket(nil, &Publish{Topic: "a", Payload: []byte("one")}, Version311)
	stream, _ = AppendPacket(stream, &Publish{Topic: "b", Payload: []byte("two")}, Version311)
	alias, _ := NewDecoder(Options{Alias: true})
	p, n, err := alias.Next(Version311, stream)
	if err != nil {
		t.Fatal(err)
	}
	pub := p.(*Publish)
	pub.Payload = append(pub.Payload, "XXXXXXXX"...)
	q, err := alias.Decode(Version311, stream[n:])
	if err != nil || string(q.(*Publish).Payload) != "two" || q.(*Publish).Topic != "b" {
		t.Fatalf("second packet damaged: %+v %v", q, err)
	}
}

// TestMQTTPacketsAllocations pins the allocation counts the event loop
// relies on.
func TestMQTTPacketsAllocations(t *testing.T) {
	v3 := &Publish{QoS: 1, Topic: "devices/42/telemetry", PacketID: 7, Payload: bytes.Repeat([]byte("x"), 128)}
	v5 := v5Publish()
	b3, _ := AppendPacket(nil, v3, Version311)
	b5, _ := AppendPacket(nil, v5, Version5)
	alias, _ := NewDecoder(Options{Alias: true})
	buf := make([]byte, 0, 1024)
	for _, tc := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"encode v3", 0, func() { _, _ = AppendPacket(buf[:0], v3, Version311) }},
		{"encode v5", 0, func() { _, _ = AppendPacket(buf[:0], v5, Version5) }},
		{"size v5", 0, func() { _, _ = Size(v5, Version5) }},
		{"decode v3 alias", 1, func() { _, _ = alias.Decode(Version311, b3) }},
		{"decode v3 copy", 3, func() { _, _ = Decode(Version311, b3) }},
		{"decode v5 alias", 2, func() { _, _ = alias.Decode(Version5, b5) }}, // packet + user slice
		{"decode v5 copy", 4, func() { _, _ = Decode(Version5, b5) }},
		{"fixed header", 0, func() { _, _, _, _, _ = DecodeFixedHeader(b5) }},
		{"incomplete", 0, func() { _, _ = Decode(Version5, b5[:10]) }},
	} {
		if n := testing.AllocsPerRun(200, tc.f); n > tc.max {
			t.Errorf("%s: %v allocations, want <= %v", tc.name, n, tc.max)
		}
	}
}
