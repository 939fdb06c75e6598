package protocol

import (
	"testing"
)

// TestStartShareGroupBodies pins the bytes of START_SHARE_GROUP's bodies.
func TestStartShareGroupBodies(t *testing.T) {
	req, err := EncodeJSON(StartShareGroupRequest{Group: "MQTT_SHARE_g", Topic: "T", Starter: "n/1", Restart: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"group":"MQTT_SHARE_g","topic":"T","starter":"n/1","restart":true}`; string(req) != want {
		t.Errorf("request %s, want %s", req, want)
	}
	resp, err := EncodeJSON(StartShareGroupResponse{Offsets: map[int32]int64{1: 9, 0: 12}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"offsets":{"0":12,"1":9}}`; string(resp) != want {
		t.Errorf("answer %s, want %s", resp, want)
	}
	var back StartShareGroupResponse
	if err := DecodeJSON(resp, &back); err != nil || back.Offsets[0] != 12 || back.Offsets[1] != 9 {
		t.Errorf("decoded %+v, %v", back, err)
	}
}

// FuzzStartShareGroupBodies: the decoder of START_SHARE_GROUP's bodies
// (untrusted on the broker) never panics, and what it accepts encodes
// again.
func FuzzStartShareGroupBodies(f *testing.F) {
	f.Add([]byte(`{"group":"MQTT_SHARE_g","topic":"T","starter":"n/1","restart":true}`))
	f.Add([]byte(`{"offsets":{"0":12,"1":9}}`))
	f.Add([]byte(`{"offsets":{"x":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r StartShareGroupRequest
		if DecodeJSON(b, &r) == nil {
			if _, err := EncodeJSON(r); err != nil {
				t.Fatal(err)
			}
		}
		var a StartShareGroupResponse
		if DecodeJSON(b, &a) == nil {
			if _, err := EncodeJSON(a); err != nil {
				t.Fatal(err)
			}
		}
	})
}
