package mqtt

import (
	"testing"
	"unsafe"
)

// TestMQTTIdleMemoryBudget pins the size of what every idle connection
// holds. Each struct is one allocation, rounded up to a Go size class
// (..., 288, 320, 352, 384, 416, 448, ...), so a field that pushes one over
// a class boundary costs every connection the whole step. At 15,000 idle
// connections per bridge process a 64-byte step is ~1 MiB of heap and
// ~2 MiB of RSS with the default GC headroom. Keep small fields together
// (bools and small ints share a word) before raising a limit here.
func TestMQTTIdleMemoryBudget(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 384 {
		t.Errorf("conn is %d bytes, over its 384-byte size class", n)
	}
	if n := unsafe.Sizeof(session{}); n > 288 {
		t.Errorf("session is %d bytes, over its 288-byte size class", n)
	}
}
