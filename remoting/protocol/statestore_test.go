package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

func TestStateStoreWireBytesPinned(t *testing.T) {
	req := &StateStoreRequest{Shard: 3, ClientID: "c1", Timestamp: "1:0:n", HasTimestamp: true,
		DedupKey: []byte{0xAA}, DedupTTLMillis: 10000, Payload: []byte("*1\r\n$3\r\nGET\r\n")}
	got := hex.EncodeToString(req.AppendBody(nil))
	want := "01" + "01" + "00000002" + "6331" + "00000005" + "313a303a6e" + "00000001" + "aa" +
		"0000000000002710" + "0000000d" + hex.EncodeToString([]byte("*1\r\n$3\r\nGET\r\n"))
	if got != want {
		t.Fatalf("request body\n got %s\nwant %s", got, want)
	}
	c := NewStateStoreRequest(req)
	if c.Code != StateStoreInvoke || c.ExtFields["shard"] != "3" {
		t.Fatalf("command %v", c)
	}
	back, err := DecodeStateStoreRequest(c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, req) {
		t.Fatalf("round trip %+v != %+v", back, req)
	}

	resp := &StateStoreResponse{Reply: []byte("+OK\r\n"), Version: "1:1:S",
		Notifications: []StateStoreNotification{{ClientID: "w", Key: []byte("k"), Op: 2, Value: []byte{}, Version: "1:1:S"}}}
	got = hex.EncodeToString(resp.AppendBody(nil))
	want = "01" + "00000005" + "2b4f4b0d0a" + "00000005" + "313a313a53" + "00000001" +
		"00000001" + "77" + "00000001" + "6b" + "02" + "00000000" + "00000005" + "313a313a53"
	if got != want {
		t.Fatalf("response body\n got %s\nwant %s", got, want)
	}
	rb, err := DecodeStateStoreResponse(resp.AppendBody(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rb, resp) {
		t.Fatalf("round trip %+v != %+v", rb, resp)
	}
}

func TestStateStoreWireRejects(t *testing.T) {
	good := (&StateStoreRequest{ClientID: "c", Payload: []byte("x")}).AppendBody(nil)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"format":    append([]byte{2}, good[1:]...),
		"flags":     append([]byte{1, 0x80}, good[2:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(bytes.Clone(good), 0),
	} {
		if _, err := DecodeStateStoreRequestBody(b); !errors.Is(err, ErrBadBody) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := DecodeStateStoreRequest(&Command{Body: good}); !errors.Is(err, ErrMissingField) {
		t.Errorf("no shard: %v", err)
	}
	huge := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	if _, err := DecodeStateStoreResponse(huge); !errors.Is(err, ErrBadBody) {
		t.Errorf("huge count: %v", err)
	}
}

func FuzzStateStoreRequest(f *testing.F) {
	f.Add((&StateStoreRequest{ClientID: "c", Timestamp: "1:0:n", HasTimestamp: true, FencingToken: "2:0:x",
		HasFencingToken: true, ProtVer: "1.0", HasProtVer: true, DedupKey: []byte{1}, DedupTTLMillis: 5, Payload: []byte("p")}).AppendBody(nil))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeStateStoreRequestBody(b)
		if err != nil {
			return
		}
		if enc := r.AppendBody(nil); !bytes.Equal(enc, b) {
			t.Fatalf("re-encode differs:\n%x\n%x", enc, b)
		}
	})
}

func FuzzStateStoreResponse(f *testing.F) {
	f.Add((&StateStoreResponse{Reply: []byte(":1\r\n"), Version: "v", Notifications: []StateStoreNotification{
		{ClientID: "c", Key: []byte("k"), Op: 1, Value: []byte("v"), Version: "1:0:n"}}}).AppendBody(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeStateStoreResponse(b)
		if err != nil {
			return
		}
		if enc := r.AppendBody(nil); !bytes.Equal(enc, b) {
			t.Fatalf("re-encode differs:\n%x\n%x", enc, b)
		}
	})
}
