package mqtt

import (
	"sync"
	"testing"
)

// TestMQTTFDTable: a descriptor's connection is found after set, gone
// after set(nil); descriptors past the table (or negative) are left to
// the map.
func TestMQTTFDTable(t *testing.T) {
	var tb fdTable
	a, b := &conn{}, &conn{}
	if c, ok := tb.get(5); !ok || c != nil {
		t.Fatalf("empty table: %v %v", c, ok)
	}
	tb.set(5, a)
	tb.set(1<<fdChunkBits+3, b)
	if c, ok := tb.get(5); !ok || c != a {
		t.Fatalf("fd 5: %v %v", c, ok)
	}
	if c, ok := tb.get(1<<fdChunkBits + 3); !ok || c != b {
		t.Fatalf("fd in the second chunk: %v %v", c, ok)
	}
	tb.set(5, nil)
	if c, ok := tb.get(5); !ok || c != nil {
		t.Fatalf("fd 5 removed: %v %v", c, ok)
	}
	for _, fd := range []int{-1, fdTableMax, fdTableMax + 7} {
		tb.set(fd, a)
		if c, ok := tb.get(fd); ok || c != nil {
			t.Fatalf("fd %d kept: %v %v", fd, c, ok)
		}
	}
}

// BenchmarkMQTTPollerLookup finds one of 50 connections by descriptor
// the way the poller's event does: "table" (fdTable), "map" (the map
// under the poller's mutex, before).
func BenchmarkMQTTPollerLookup(b *testing.B) {
	var tb fdTable
	var mu sync.Mutex
	m := map[int]*conn{}
	for fd := 10; fd < 60; fd++ {
		c := &conn{fd: fd}
		tb.set(fd, c)
		m[fd] = c
	}
	b.Run("table", func(b *testing.B) {
		fd := 10
		for b.Loop() {
			if c, _ := tb.get(fd); c == nil {
				b.Fatal("missing")
			}
			if fd++; fd == 60 {
				fd = 10
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		fd := 10
		for b.Loop() {
			mu.Lock()
			c := m[fd]
			mu.Unlock()
			if c == nil {
				b.Fatal("missing")
			}
			if fd++; fd == 60 {
				fd = 10
			}
		}
	})
}
