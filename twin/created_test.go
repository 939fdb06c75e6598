package twin

import "testing"

// TestTwinCreatedIdentity: the etag a PutDevice returns tells whether that
// write created the identity (an upsert that creates, a create after a
// delete) or updated it.
func TestTwinCreatedIdentity(t *testing.T) {
	e := mustEngine(t, Options{})
	put := func(mode PutMode) string {
		t.Helper()
		rep := do(t, e, &Request{Op: OpPutDevice, DeviceID: "d", Mode: mode}, t0)
		if rep.Err != nil {
			t.Fatal(rep.Err)
		}
		return rep.Etag
	}
	if et := put(PutUpsert); !CreatedIdentity(et) || !CreatedIdentity(`"`+et+`"`) {
		t.Fatalf("upsert that created: etag %q not a creation", et)
	}
	if et := put(PutUpsert); CreatedIdentity(et) {
		t.Fatalf("upsert that updated: etag %q reads as a creation", et)
	}
	if rep := do(t, e, &Request{Op: OpDeleteDevice, DeviceID: "d"}, t0); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	if et := put(PutCreate); !CreatedIdentity(et) {
		t.Fatalf("create after a delete: etag %q not a creation", et)
	}
}
