package client

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// aliases reports whether s's bytes lie inside chunk.
func aliases(chunk []byte, p unsafe.Pointer, n int) bool {
	if n == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&chunk[0]))
	q := uintptr(p)
	return q >= lo && q < lo+uintptr(len(chunk))
}

// TestClientMessageBodyOwnsItsMemory: a consumed message's body and
// strings must not point into the pull response's buffer, or keeping one
// small message would keep the connection's whole read chunk alive.
func TestClientMessageBodyOwnsItsMemory(t *testing.T) {
	chunk := make([]byte, 1000, 64<<10)
	m0 := &record.Message{Topic: "T", Body: []byte("payload"), StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"), BornHost: netip.MustParseAddrPort("10.0.0.2:1"),
		Properties: "TAGS\x01tagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010A8418B4AAC2000000000000\x02color\x01red"}
	chunk, err := record.AppendRecord(chunk, m0)
	if err != nil {
		t.Fatal(err)
	}
	chunk = chunk[:cap(chunk)]
	msgs, err := decodeMessages(chunk[1000:1000+record.Size(m0)], "b")
	if err != nil || len(msgs) != 1 {
		t.Fatalf("decode: %d messages, %v", len(msgs), err)
	}
	m := msgs[0]
	if string(m.Body) != "payload" || m.Tags != "tagA" || m.Properties["color"] != "red" {
		t.Fatalf("decoded %+v", m)
	}
	for name, s := range map[string]string{"topic": m.Topic, "queue topic": m.Queue.Topic, "properties": m.RawProperties,
		"msg id": m.MsgID, "offset id": m.OffsetMsgID, "tags": m.Tags, "key": m.Keys[0], "user property": m.Properties["color"]} {
		if aliases(chunk, unsafe.Pointer(unsafe.StringData(s)), len(s)) {
			t.Errorf("the message's %s aliases the response buffer", name)
		}
	}
	if aliases(chunk, unsafe.Pointer(&m.Body[0]), len(m.Body)) {
		t.Fatal("the message body aliases the response buffer")
	}
	// Appending to the body must not overwrite the strings that share
	// its allocation.
	props := strings.Clone(m.RawProperties)
	_ = append(m.Body, bytes.Repeat([]byte{0xFF}, 100)...)
	if m.RawProperties != props {
		t.Fatal("appending to the body changed the raw properties")
	}
}

// referenceMessage is the conversion decodeMessages must match, written
// the plain way: record.Decode, then each field converted on its own.
func referenceMessage(t *testing.T, b []byte, brokerName string) *MessageExt {
	t.Helper()
	r, _, err := record.Decode(b, false)
	if err != nil {
		t.Fatal(err)
	}
	body := r.Body
	if r.SysFlag&record.FlagCompressed != 0 {
		if body, err = record.DecompressBody(nil, r.Body, r.SysFlag, 0); err != nil {
			t.Fatal(err)
		}
	}
	m := &MessageExt{
		Message:         Message{Topic: r.Topic, Body: body, Flag: r.Flag},
		OffsetMsgID:     record.OffsetMessageID(r.StoreHost, r.PhysicalOffset),
		Queue:           MessageQueue{Topic: r.Topic, BrokerName: brokerName, QueueID: r.QueueID},
		QueueOffset:     r.QueueOffset,
		CommitLogOffset: r.PhysicalOffset,
		BornTimestamp:   r.BornTimestamp,
		StoreTimestamp:  r.StoreTimestamp,
		BornHost:        r.BornHost,
		StoreHost:       r.StoreHost,
		ReconsumeTimes:  r.ReconsumeTimes,
		SysFlag:         r.SysFlag,
		RawProperties:   r.Properties,
	}
	props, _ := record.ParseProperties(r.Properties)
	for _, p := range props {
		switch p.Key {
		case record.PropertyTags:
			m.Tags = p.Value
		case record.PropertyKeys:
			m.Keys = strings.Fields(p.Value)
		case record.PropertyDelayLevel:
			m.DelayLevel, _ = strconv.Atoi(p.Value)
		case record.PropertyUniqueClientMessageIDKeyIndex:
			m.MsgID = p.Value
		}
		if !systemProperty(p.Key) {
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties[p.Key] = p.Value
		}
	}
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	return m
}

// TestClientDecodeMessagesFields: every field of every message of a pull
// body decodes as the plain conversion does: topics, hosts of both
// families, compressed bodies, system and user properties, messages
// without properties, the client id or its offset id fallback.
func TestClientDecodeMessagesFields(t *testing.T) {
	compressed, flags, err := record.CompressBody(nil, bytes.Repeat([]byte("squash "), 200), record.CompressionAlgoZlib, 6)
	if err != nil {
		t.Fatal(err)
	}
	v4 := netip.MustParseAddrPort("192.168.1.7:10911")
	v6 := netip.MustParseAddrPort("[2001:db8::5]:10912")
	recs := []*record.Message{
		{Topic: "TopicA", QueueID: 3, Flag: 7, QueueOffset: 10, PhysicalOffset: 4096, BornTimestamp: 1, StoreTimestamp: 2,
			BornHost: v4, StoreHost: v4, Body: []byte("hello"),
			Properties: "TAGS\x01t1\x02KEYS\x01 a  b \x02DELAY\x013\x02UNIQ_KEY\x01AAAABBBBCCCCDDDDEEEEFFFF00001111\x02WAIT\x01false\x02u1\x01v1\x02u2\x01v\x01x"},
		{Topic: "TopicA", QueueID: 3, QueueOffset: 11, PhysicalOffset: 5000, BornHost: v6, StoreHost: v6, Body: []byte("no properties")},
		{Topic: "TopicA", QueueID: 3, QueueOffset: 12, PhysicalOffset: 6000, BornHost: v4, StoreHost: v6, ReconsumeTimes: 2,
			SysFlag: flags, Body: compressed, Properties: "CLUSTER\x01c\x02RETRY_TOPIC\x01X"},
		{Topic: "%RETRY%g", QueueID: 0, QueueOffset: 13, PhysicalOffset: 7000, BornHost: v4, StoreHost: v4, Body: []byte("b"),
			Properties: "\x02\x02junk\x02k\x01v\x02"},
	}
	var body []byte
	var starts []int
	for _, r := range recs {
		starts = append(starts, len(body))
		if body, err = record.AppendRecord(body, r); err != nil {
			t.Fatal(err)
		}
	}
	starts = append(starts, len(body))
	got, err := decodeMessages(body, "brokerX")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d messages, want %d", len(got), len(recs))
	}
	for i := range recs {
		want := referenceMessage(t, body[starts[i]:starts[i+1]], "brokerX")
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("message %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
	if got[0].Topic != "TopicA" || got[0].Tags != "t1" || !reflect.DeepEqual(got[0].Keys, []string{"a", "b"}) ||
		got[0].DelayLevel != 3 || got[0].MsgID != "AAAABBBBCCCCDDDDEEEEFFFF00001111" || got[0].Properties["u2"] != "v\x01x" {
		t.Errorf("message 0: %+v", got[0])
	}
	if got[1].MsgID != got[1].OffsetMsgID || len(got[1].OffsetMsgID) != record.OffsetMessageIDLenV6 {
		t.Errorf("message 1 ids %q %q", got[1].MsgID, got[1].OffsetMsgID)
	}
	if string(got[2].Body) != strings.Repeat("squash ", 200) {
		t.Errorf("message 2 body not inflated: %d bytes", len(got[2].Body))
	}

	// A truncated body yields the messages before the damage and an error.
	part, err := decodeMessages(body[:starts[2]+10], "b")
	if err == nil || len(part) != 2 {
		t.Fatalf("truncated body: %d messages, %v", len(part), err)
	}
}

// TestClientDecodeMessagesAllocs: a plain message (no user properties)
// costs two allocations besides the result slice: the MessageExt and
// one buffer with its body, properties and offset id.
func TestClientDecodeMessagesAllocs(t *testing.T) {
	var body []byte
	const n = 32
	for i := range n {
		var err error
		body, err = record.AppendRecord(body, &record.Message{Topic: "TopicA", QueueOffset: int64(i), PhysicalOffset: int64(i) * 300,
			BornHost: netip.MustParseAddrPort("10.0.0.2:5000"), StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"),
			Body: make([]byte, 128), Properties: "UNIQ_KEY\x01AAAABBBBCCCCDDDDEEEEFFFF00001111\x02CLUSTER\x01c"})
		if err != nil {
			t.Fatal(err)
		}
	}
	a := testing.AllocsPerRun(100, func() {
		msgs, err := decodeMessages(body, "b")
		if err != nil || len(msgs) != n {
			t.Fatalf("%d messages, %v", len(msgs), err)
		}
	})
	// 2 per message, the slice and the topic string.
	if want := float64(2*n + 2); a > want {
		t.Errorf("%.1f allocations per %d messages, want <= %.0f", a, n, want)
	}
}

// TestClientEncodePropertiesMatches: the direct encoding of a message's
// properties gives the bytes (and the errors) of the general one.
func TestClientEncodePropertiesMatches(t *testing.T) {
	ids := record.NewUniqueIDGenerator(netip.MustParseAddr("10.1.2.3"), 77)
	ids6 := record.NewUniqueIDGenerator(netip.MustParseAddr("2001:db8::9"), 77)
	msgs := []Message{
		{},
		{Tags: "TagA"},
		{Keys: []string{"k1", "k2"}},
		{Keys: []string{""}},
		{Keys: []string{"", ""}},
		{Keys: []string{"a\x02b"}},
		{Tags: "bad\x01tag"},
		{Tags: "T", Keys: []string{"k"}, DelayLevel: 18},
		{DelayLevel: -1, Flag: 3},
		{Tags: "T", Properties: map[string]string{"color": "red"}},
		{Properties: map[string]string{"": "x"}},
		{Tags: strings.Repeat("t", record.MaxPropertiesLen-60)},
		{Tags: strings.Repeat("t", record.MaxPropertiesLen)},
		{Keys: []string{strings.Repeat("k", record.MaxPropertiesLen)}},
	}
	for i, m := range msgs {
		for _, wait := range []bool{true, false} {
			for _, g := range []*record.UniqueIDGenerator{ids, ids6} {
				props, uniq, err := m.encodeProperties(g, wait)
				want, werr := m.properties(uniq, wait)
				if (err == nil) != (werr == nil) || props != want {
					t.Errorf("message %d wait=%v: %q, %v; want %q, %v", i, wait, props, err, want, werr)
				}
				if err == nil {
					if len(uniq) != record.UniqueIDLenV4 && len(uniq) != record.UniqueIDLenV6 {
						t.Errorf("message %d: unique id %q", i, uniq)
					}
					if v, _ := record.LookupPropertyString(props, record.PropertyUniqueClientMessageIDKeyIndex); v != uniq {
						t.Errorf("message %d: UNIQ_KEY %q, returned %q", i, v, uniq)
					}
				}
				if err != nil && !errors.Is(err, ErrBadMessage) {
					t.Errorf("message %d: error %v is not ErrBadMessage", i, err)
				}
			}
		}
	}
	// Plain messages take one allocation.
	m := Message{Tags: "TagA", Keys: []string{"k1"}}
	if a := testing.AllocsPerRun(100, func() {
		if _, _, err := m.encodeProperties(ids, true); err != nil {
			t.Fatal(err)
		}
	}); a > 1 {
		t.Errorf("encodeProperties: %.1f allocations, want 1", a)
	}
}
