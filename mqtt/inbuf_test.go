package mqtt

import "testing"

// An input array that requests may be read from in place (an inline
// handler runs while the connection is scheduled) is not handed back to
// the pool when the input outgrows it: another connection would read
// into it under the handler's feet.
func TestMQTTInputOutgrownWhileScheduledNotPooled(t *testing.T) {
	s, err := NewServer(Options{Listen: []string{"127.0.0.1:0"}}, NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		scheduled := true
		c := &conn{srv: s, scheduled: scheduled}
		c.appendIn([]byte("request"))
		old := c.inBuf
		if old == nil {
			t.Fatal("the first input is not in a pooled array")
		}
		c.appendIn(make([]byte, inBufSize)) // outgrows it
		if c.inBuf == old {
			t.Fatal("the grown input still names the pooled array")
		}
		if string(c.in[:7]) != "request" {
			t.Fatalf("input %q", c.in[:7])
		}
		// sync.Pool hands a goroutine back what it just put: without
		// the rule, this Get returns the old array.
		if got := inBufs.Get().(*[]byte); got == old {
			t.Fatal("the array an inline handler may still read went back to the pool")
		}
	}
}
