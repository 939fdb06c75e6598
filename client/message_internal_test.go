package client

import (
	"testing"
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// TestClientMessageBodyOwnsItsMemory: a consumed message's body must not
// point into the pull response's buffer, or keeping one small message
// would keep the connection's whole read chunk alive.
func TestClientMessageBodyOwnsItsMemory(t *testing.T) {
	chunk := make([]byte, 64<<10)
	copy(chunk[1000:], "payload")
	r := &record.Message{Topic: "T", Body: chunk[1000:1007]}
	m, err := fromRecord(r, "b")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != "payload" {
		t.Fatalf("body %q", m.Body)
	}
	lo := uintptr(unsafe.Pointer(&chunk[0]))
	p := uintptr(unsafe.Pointer(&m.Body[0]))
	if p >= lo && p < lo+uintptr(len(chunk)) {
		t.Fatal("the message body aliases the response buffer")
	}
}
