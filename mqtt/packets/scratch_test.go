package packets

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// TestMQTTPacketsTypedEncoders checks AppendPublish, PublishSize and
// AppendAck against AppendPacket and Size on random packets of every
// version: the same bytes, the same errors.
func TestMQTTPacketsTypedEncoders(t *testing.T) {
	g := newGen(7)
	for _, v := range allVersions {
		for i := 0; i < 3000; i++ {
			p := g.anyPacket(v)
			want, wantErr := AppendPacket(nil, p, v)
			var got []byte
			var err error
			switch p := p.(type) {
			case *Publish:
				got, err = AppendPublish(nil, p, v)
				if n, serr := PublishSize(p, v); serr != nil || n != len(want) {
					t.Fatalf("v%s PublishSize = %d, %v; AppendPacket wrote %d", v, n, serr, len(want))
				}
			case *Puback:
				got, err = AppendAck(nil, TypePuback, p.PacketID, p.ReasonCode, &p.Properties, v)
			case *Pubrec:
				got, err = AppendAck(nil, TypePubrec, p.PacketID, p.ReasonCode, &p.Properties, v)
			case *Pubrel:
				got, err = AppendAck(nil, TypePubrel, p.PacketID, p.ReasonCode, &p.Properties, v)
			case *Pubcomp:
				got, err = AppendAck(nil, TypePubcomp, p.PacketID, p.ReasonCode, &p.Properties, v)
			default:
				continue
			}
			if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("v%s %T: typed encoder gave % X, %v; AppendPacket % X, %v", v, p, got, err, want, wantErr)
			}
		}
	}
	if b, err := AppendAck(nil, TypePuback, 1, 0, nil, Version5); err != nil || !bytes.Equal(b, []byte{0x40, 2, 0, 1}) {
		t.Fatalf("PUBACK without properties: % X, %v", b, err)
	}
	for _, tc := range []struct {
		t  Type
		id uint16
		v  Version
	}{{TypeSuback, 1, Version5}, {TypePuback, 0, Version5}, {TypePubrel, 1, 9}} {
		if b, err := AppendAck([]byte{1}, tc.t, tc.id, 0, nil, tc.v); !errors.Is(err, ErrEncode) || !bytes.Equal(b, []byte{1}) {
			t.Errorf("AppendAck(%v, id %d, v%d) = % X, %v; want dst unchanged and ErrEncode", tc.t, tc.id, tc.v, b, err)
		}
	}
}

// TestMQTTPacketsNextScratch decodes a stream of random packets with
// NextScratch into one Scratch and expects what Next decodes; a packet
// decoded into the Scratch keeps nothing of the one before (a PUBLISH
// with properties followed by one without).
func TestMQTTPacketsNextScratch(t *testing.T) {
	g := newGen(8)
	var d Decoder
	var s Scratch
	for _, v := range allVersions {
		for i := 0; i < 3000; i++ {
			b, err := AppendPacket(nil, g.anyPacket(v), v)
			if err != nil {
				t.Fatal(err)
			}
			want, wn, werr := d.Next(v, b)
			got, n, err := d.NextScratch(v, b, &s)
			if n != wn || (err != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("v%s: NextScratch = %+v, %d, %v; Next %+v, %d, %v", v, got, n, err, want, wn, werr)
			}
		}
	}
	with, _ := AppendPacket(nil, v5Publish(), Version5)
	bare := &Publish{QoS: 1, PacketID: 9, Topic: "a/b", Payload: []byte("p")}
	without, _ := AppendPacket(nil, bare, Version5)
	if _, _, err := d.NextScratch(Version5, with, &s); err != nil {
		t.Fatal(err)
	}
	got, _, err := d.NextScratch(Version5, without, &s)
	if err != nil || !reflect.DeepEqual(got, bare) {
		t.Fatalf("second PUBLISH in the Scratch: %+v, %v; want %+v", got, err, bare)
	}
}

// TestMQTTPacketsScratchAllocations pins what the server's hot path
// allocates: nothing to decode an acknowledgement into a Scratch or to
// encode one or a PUBLISH, and only the copies of its bytes (strings,
// byte slices, the user property list) to decode a PUBLISH.
func TestMQTTPacketsScratchAllocations(t *testing.T) {
	pub := v5Publish()
	b5, _ := AppendPacket(nil, pub, Version5)
	ack, _ := AppendAck(nil, TypePuback, 3, 0, nil, Version5)
	var d Decoder
	var s Scratch
	buf := make([]byte, 0, 1024)
	payload := []byte("12345678")
	for _, tc := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"decode PUBACK", 0, func() { _, _, _ = d.NextScratch(Version5, ack, &s) }},
		{"decode v5 PUBLISH", 3, func() { _, _, _ = d.NextScratch(Version5, b5, &s) }}, // strings, bytes, user slice
		{"encode PUBACK", 0, func() { _, _ = AppendAck(buf[:0], TypePuback, 3, 0, nil, Version5) }},
		{"encode PUBLISH", 0, func() {
			p := Publish{QoS: 1, PacketID: 4, Topic: "t", Payload: payload}
			_, _ = AppendPublish(buf[:0], &p, Version5)
		}},
	} {
		if n := testing.AllocsPerRun(200, tc.f); n > tc.max {
			t.Errorf("%s: %v allocations, want <= %v", tc.name, n, tc.max)
		}
	}
}

// TestMQTTPacketsScratchAliasUsers decodes PUBLISHes with 0 to 70 user
// properties in place (NextScratchAlias, whose user property list goes
// straight into the Scratch's array) and expects what Decode gives, also
// after an array grown past maxScratchUsers was left to its packet.
func TestMQTTPacketsScratchAliasUsers(t *testing.T) {
	var d Decoder
	var s Scratch
	for _, n := range []int{3, 0, 9, 70, 2, 65, 8, 1} {
		p := &Publish{QoS: 1, PacketID: 5, Topic: "a/b/c/d/e", Payload: []byte("x")}
		for i := range n {
			p.Properties.User = append(p.Properties.User, UserProperty{Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf("value-%d", i)})
		}
		b, err := AppendPacket(nil, p, Version5)
		if err != nil {
			t.Fatal(err)
		}
		want, err := d.Decode(Version5, b)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := d.NextScratchAlias(Version5, b, &s)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d user properties: NextScratchAlias = %+v, %v; Decode %+v", n, got, err, want)
		}
		if u := got.(*Publish).Properties.User; n > 0 && cap(u) != n {
			t.Fatalf("%d user properties: the list's capacity is %d", n, cap(u))
		}
		if n > maxScratchUsers && s.user != nil {
			t.Fatalf("%d user properties: the Scratch kept an array of %d", n, cap(s.user))
		}
	}
}
