package protocol

import (
	"errors"
	"reflect"
	"testing"
)

// A PUSH_REPLY_MESSAGE_TO_CLIENT frame's JSON header, byte for byte: the
// keys Java's client (ReplyMessageRequestHeader, every @CFNotNull field
// present) and rocketmq-client-go v2.1.2 read.
func TestRemotingReplyHeaderBytes(t *testing.T) {
	h := &ReplyMessageRequestHeader{ProducerGroup: "pg", Topic: "DefaultCluster_REPLY_TOPIC", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 4, QueueID: 0, SysFlag: 0, BornTimestamp: 1700000000000, Flag: 0,
		Properties: "CORRELATION_ID\x01c1\x02MSG_TYPE\x01reply\x02", ReconsumeTimes: 0,
		BornHost: "127.0.0.1:50000", StoreHost: "127.0.0.1:10911", StoreTimestamp: 1700000000005}
	req := NewRequest(PushReplyMessageToClient, h, []byte("answer"))
	req.Opaque = 3
	frame, err := EncodeFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":326,"extFields":{"bornHost":"127.0.0.1:50000","bornTimestamp":"1700000000000",` +
		`"defaultTopic":"TBW102","defaultTopicQueueNums":"4","flag":"0",` +
		`"producerGroup":"pg","properties":"CORRELATION_ID\u0001c1\u0002MSG_TYPE\u0001reply\u0002",` +
		`"queueId":"0","reconsumeTimes":"0","storeHost":"127.0.0.1:10911","storeTimestamp":"1700000000005",` +
		`"sysFlag":"0","topic":"DefaultCluster_REPLY_TOPIC","unitMode":"false"},` +
		`"flag":0,"language":"GO","opaque":3,"serializeTypeCurrentRPC":"JSON","version":409}`
	hl := int(uint32(frame[5])<<16 | uint32(frame[6])<<8 | uint32(frame[7]))
	if got := string(frame[8 : 8+hl]); got != want {
		t.Fatalf("header\n%s\nwant\n%s", got, want)
	}
	if string(frame[8+hl:]) != "answer" {
		t.Fatalf("body %q", frame[8+hl:])
	}
	back := decodeWhole(t, frame)
	var got ReplyMessageRequestHeader
	if err := back.DecodeHeader(&got); err != nil || !reflect.DeepEqual(&got, h) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// Required strings are written even when empty (Java's client refuses
	// a frame without them).
	f := ExtFields{}
	(&ReplyMessageRequestHeader{}).EncodeFields(f)
	for _, k := range []string{"producerGroup", "topic", "defaultTopic", "bornHost", "storeHost"} {
		if _, ok := f[k]; !ok {
			t.Errorf("empty %s not written", k)
		}
	}
	if _, ok := f["properties"]; ok {
		t.Errorf("empty optional properties written")
	}
}

func TestRemotingReplyTopic(t *testing.T) {
	if got := ReplyTopic("DefaultCluster"); got != "DefaultCluster_REPLY_TOPIC" {
		t.Fatalf("reply topic %q", got)
	}
}

// FuzzReplyHeader: any frame decodes into a reply (or forwarded reply)
// header or an error, never a panic, and what decodes survives a round
// trip.
func FuzzReplyHeader(f *testing.F) {
	h := &ReplyMessageRequestHeader{ProducerGroup: "pg", Topic: "C_REPLY_TOPIC", DefaultTopic: "TBW102", BornTimestamp: 1,
		Properties: "CORRELATION_ID\x01c\x02", BornHost: "127.0.0.1:1", StoreHost: "127.0.0.1:2", StoreTimestamp: 2}
	frame, err := EncodeFrame(NewRequest(PushReplyMessageToClient, h, []byte("b")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(frame[4:])
	f.Add([]byte(`{"code":326,"extFields":{"queueId":"x"}}`))
	fwd, err := EncodeFrame(NewRequest(ForwardReplyMessage, &ForwardReplyHeader{ReplyMessageRequestHeader: *h, PushTimeoutMillis: 5}, []byte("b")))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fwd[4:])
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeFrame(data)
		if err != nil {
			return
		}
		var fwd ForwardReplyHeader
		if err := c.DecodeHeader(&fwd); err == nil {
			back := NewRequest(ForwardReplyMessage, &fwd, nil)
			var again ForwardReplyHeader
			if err := back.DecodeHeader(&again); err != nil || !reflect.DeepEqual(fwd, again) {
				t.Fatalf("forward round trip: %+v -> %+v, %v", fwd, again, err)
			}
		}
		var got ReplyMessageRequestHeader
		if err := c.DecodeHeader(&got); err != nil {
			return
		}
		back := NewRequest(PushReplyMessageToClient, &got, nil)
		var again ReplyMessageRequestHeader
		if err := back.DecodeHeader(&again); err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("round trip: %+v -> %+v, %v", got, again, err)
		}
	})
}

// A FORWARD_REPLY_MESSAGE (SmartGo's 9130, broker to broker) frame's JSON
// header, byte for byte: the push's fields and pushTimeoutMillis.
func TestRemotingForwardReplyHeaderBytes(t *testing.T) {
	if ForwardReplyMessage != 9130 {
		t.Fatalf("ForwardReplyMessage is %d, frozen at 9130", ForwardReplyMessage)
	}
	h := &ForwardReplyHeader{ReplyMessageRequestHeader: ReplyMessageRequestHeader{ProducerGroup: "pg",
		Topic: "DefaultCluster_REPLY_TOPIC", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, BornTimestamp: 1700000000000,
		Properties: "REPLY_TO_CLIENT\x01127.0.0.1@1\x02", BornHost: "127.0.0.1:50000", StoreHost: "127.0.0.1:10911",
		StoreTimestamp: 1700000000005}, PushTimeoutMillis: 2500}
	req := NewRequest(ForwardReplyMessage, h, []byte("answer"))
	req.Opaque = 9
	frame, err := EncodeFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":9130,"extFields":{"bornHost":"127.0.0.1:50000","bornTimestamp":"1700000000000",` +
		`"defaultTopic":"TBW102","defaultTopicQueueNums":"4","flag":"0",` +
		`"producerGroup":"pg","properties":"REPLY_TO_CLIENT\u0001127.0.0.1@1\u0002",` +
		`"pushTimeoutMillis":"2500","queueId":"0","reconsumeTimes":"0","storeHost":"127.0.0.1:10911",` +
		`"storeTimestamp":"1700000000005","sysFlag":"0","topic":"DefaultCluster_REPLY_TOPIC","unitMode":"false"},` +
		`"flag":0,"language":"GO","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}`
	hl := int(uint32(frame[5])<<16 | uint32(frame[6])<<8 | uint32(frame[7]))
	if got := string(frame[8 : 8+hl]); got != want {
		t.Fatalf("header\n%s\nwant\n%s", got, want)
	}
	back := decodeWhole(t, frame)
	var got ForwardReplyHeader
	if err := back.DecodeHeader(&got); err != nil || !reflect.DeepEqual(&got, h) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// Without the timeout, or with one below 1 ms: a clear error.
	for _, v := range []string{"", "0", "-5", "x"} {
		f := ExtFields{}
		h.EncodeFields(f)
		if v == "" {
			delete(f, "pushTimeoutMillis")
		} else {
			f["pushTimeoutMillis"] = v
		}
		var bad ForwardReplyHeader
		err := bad.DecodeFields(f)
		if !errors.Is(err, ErrMissingField) && !errors.Is(err, ErrBadField) {
			t.Errorf("pushTimeoutMillis %q: %v", v, err)
		}
	}
}
