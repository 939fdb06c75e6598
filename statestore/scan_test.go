package statestore

import (
	"fmt"
	"testing"
	"time"
)

// TestStateStoreScan: keys by prefix in byte order, paged with after and
// limit, expired keys left out, values and versions as GET sees them.
func TestStateStoreScan(t *testing.T) {
	e, err := New(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	set := func(args ...string) {
		t.Helper()
		var b [][]byte
		for _, a := range args {
			b = append(b, []byte(a))
		}
		r := &Request{Payload: AppendRequest(nil, b...)}
		r.SetUserProperty(PropTimestamp, "1700000000000:0:scan-test")
		entry, out, needsLog := e.Prepare(r, now)
		if !needsLog {
			t.Fatalf("%v: %s", args, out.Reply.Payload)
		}
		if _, err := e.Apply(entry, now); err != nil {
			t.Fatal(err)
		}
	}
	for i := 5; i >= 0; i-- {
		set("SET", fmt.Sprintf("dev/%d", i), fmt.Sprintf("v%d", i))
	}
	set("SET", "other", "x")
	set("SET", "dev/9", "soon gone", "PX", "10")

	keys, more := e.Scan([]byte("dev/"), nil, 4, now)
	if len(keys) != 4 || !more || string(keys[0].Key) != "dev/0" || string(keys[3].Key) != "dev/3" || string(keys[2].Value) != "v2" {
		t.Fatalf("page 1: %d %v %+v", len(keys), more, keys)
	}
	if _, v, _ := e.Get([]byte("dev/2"), now); v != keys[2].Version {
		t.Fatalf("version %v, GET sees %v", keys[2].Version, v)
	}
	keys, more = e.Scan([]byte("dev/"), keys[3].Key, 4, now)
	if len(keys) != 3 || more || string(keys[2].Key) != "dev/9" || keys[2].ExpireAt == 0 {
		t.Fatalf("page 2: %v %+v", more, keys)
	}
	keys, _ = e.Scan([]byte("dev/"), []byte("dev/5"), 10, now.Add(time.Second))
	if len(keys) != 0 {
		t.Fatalf("expired key listed: %+v", keys)
	}
	if keys, _ := e.Scan(nil, nil, 100, now); len(keys) != 8 {
		t.Fatalf("every key: %d", len(keys))
	}
	if keys, more := e.Scan(nil, nil, 0, now); keys != nil || more {
		t.Fatal("limit 0 returned keys")
	}
}
