package cluster

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterHASlaveAppliesOffsetDeltas: a slave applies the offsets an
// offset notice carries on top of what it holds, and falls back to a
// full copy of the master's offsets when the notice does not follow on
// from what it applied (a missed notice), its body is bad, it names
// another master run, or it has no delta at all (an older master). The
// forged notices come from the master's host (127.0.0.1), so the slave
// takes them; the entry they add exists only on the slave, and a full
// copy removes it.
func TestClusterHASlaveAppliesOffsetDeltas(t *testing.T) {
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) { o.SlaveSyncInterval = time.Hour }})
	m, s := c.Broker(0), c.Slave(0)
	topicsCopied(t, m, s, 20*time.Second)
	has := func(group, topic string, q int32, want int64) func() error {
		return func() error {
			if off, ok := s.Offsets().Query(group, topic, q); !ok || off != want {
				return fmt.Errorf("slave's offset of %s/%s/%d: %d (%v), want %d", group, topic, q, off, ok, want)
			}
			return nil
		}
	}
	m.Offsets().Commit("g", "Real", 0, 5)
	testutil.Eventually(t, 20*time.Second, has("g", "Real", 0, 5))

	// next is one past the master's change count now: a delta up to it
	// follows on from anything the slave applied.
	var run string
	next := func() uint64 {
		t.Helper()
		all := invokeFrom(t, "127.0.0.1", m.Addr(), protocol.NewRequest(protocol.GetAllConsumerOffset, nil, nil))
		n, err := strconv.ParseUint(all.ExtFields[protocol.FieldOffsetSeq], 10, 64)
		if run = all.ExtFields[protocol.FieldOffsetRun]; run == "" || err != nil {
			t.Fatalf("GET_ALL_CONSUMER_OFFSET answer's fields %v: want offsetRun and offsetSeq", all.ExtFields)
		}
		return n + 1
	}
	next()
	forged := func(from, to uint64, body string) {
		t.Helper()
		req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, []byte(body))
		req.ExtFields = protocol.ExtFields{"scope": "offsets", protocol.FieldOffsetRun: run,
			protocol.FieldOffsetFrom: strconv.FormatUint(from, 10), protocol.FieldOffsetTo: strconv.FormatUint(to, 10),
			protocol.FieldDelaySeq: "0"}
		if resp := invokeFrom(t, "127.0.0.1", s.Addr(), req); resp.Code != protocol.Success {
			t.Fatalf("forged notice: code %d %s", resp.Code, resp.Remark)
		}
	}
	// A delta that follows on: applied, without a copy (the master has no
	// such entry), and the master's own deltas still apply on top, once
	// its change count passes the forged one's. A copy the slave started
	// before (at its start, on a topic notice) may still remove the forged
	// entry once: a slave that copies on every offset notice removes it
	// every time. Two tries at least, so that the second's path (Real/0
	// no longer changing), which such a copy under load leads to, runs
	// every time.
	for try := int32(0); ; try++ {
		forged(0, next(), `{"offsetTable":{"Forged@g":{"0":99}}}`)
		testutil.Eventually(t, 20*time.Second, has("g", "Forged", 0, 99))
		// The forged notice's count covers the master's next change,
		// which the slave then takes as applied: make one (Real/0
		// changes in the first try only; a commit of the same offset is
		// no change), then the one the slave must apply.
		m.Offsets().Commit("g", "Real", 0, 6)
		if try > 0 {
			m.Offsets().Commit("g", "Covered", try, 1)
		}
		m.Offsets().Commit("g", "Real", 1+try, 1)
		testutil.Eventually(t, 20*time.Second, has("g", "Real", 1+try, 1))
		err := has("g", "Forged", 0, 99)()
		if err == nil && try > 0 {
			break
		}
		if try == 4 {
			t.Fatalf("the master's offset notices copied everything: %v", err)
		}
	}
	gone := func() error {
		if off, ok := s.Offsets().Query("g", "Forged", 0); ok {
			return fmt.Errorf("the slave still has the forged offset %d: no full copy", off)
		}
		return nil
	}
	// A delta past what the slave applied (it missed one): a full copy.
	forged(1<<62, 1<<62+1, `{"offsetTable":{"Gap@g":{"0":1}}}`)
	testutil.Eventually(t, 20*time.Second, gone)
	if _, ok := s.Offsets().Query("g", "Gap", 0); ok {
		t.Fatal("the slave applied a delta that does not follow on from what it holds")
	}
	if err := has("g", "Real", 0, 6)(); err != nil {
		t.Fatal(err)
	}
	// A bad body: a full copy too, and no harm.
	forged(0, next(), `{"offsetTable":{"Forged@g":{"0":99}}}`)
	testutil.Eventually(t, 20*time.Second, has("g", "Forged", 0, 99))
	m.Offsets().Commit("g", "Real", 10, 1) // the master's change count passes the forged one's
	m.Offsets().Commit("g", "Real", 11, 1)
	testutil.Eventually(t, 20*time.Second, has("g", "Real", 11, 1))
	forged(0, 1<<62, `{"offsetTable":`)
	testutil.Eventually(t, 20*time.Second, gone)
	// An offset notice without the delta's fields (an older master's):
	// a full copy, as before.
	forged(0, next(), `{"offsetTable":{"Forged@g":{"0":99}}}`)
	testutil.Eventually(t, 20*time.Second, has("g", "Forged", 0, 99))
	old := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil)
	old.ExtFields = protocol.ExtFields{"scope": "offsets"}
	if resp := invokeFrom(t, "127.0.0.1", s.Addr(), old); resp.Code != protocol.Success {
		t.Fatalf("an older master's offset notice: code %d %s", resp.Code, resp.Remark)
	}
	testutil.Eventually(t, 20*time.Second, gone)
	m.Offsets().Commit("g", "Real", 12, 1) // past the forged change count again
	m.Offsets().Commit("g", "Real", 13, 1)
	testutil.Eventually(t, 20*time.Second, has("g", "Real", 13, 1))
	// Another run (the master restarted): a full copy.
	forged(0, next(), `{"offsetTable":{"Forged@g":{"0":99}}}`)
	testutil.Eventually(t, 20*time.Second, has("g", "Forged", 0, 99))
	next()
	r, err := strconv.ParseUint(run, 10, 64)
	if err != nil {
		t.Fatalf("offsetRun %q: %v", run, err)
	}
	run = strconv.FormatUint(r+1, 10)
	forged(0, 1<<62, `{"offsetTable":{"Other@g":{"0":1}}}`)
	testutil.Eventually(t, 20*time.Second, gone)
	if _, ok := s.Offsets().Query("g", "Other", 0); ok {
		t.Fatal("the slave applied a delta of another master run")
	}
}
