//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// pullAll reads every message of topic's queues 0..queues-1 from addr with
// raw pulls and returns their bodies, sorted.
func pullAll(t *testing.T, addr, topic string, queues int32) []string {
	t.Helper()
	var bodies []string
	for _, m := range pullRecords(t, addr, topic, queues) {
		bodies = append(bodies, string(m.Body))
	}
	sort.Strings(bodies)
	return bodies
}

// pullRecords reads every message of topic's queues 0..queues-1 from addr
// with raw pulls, queue after queue in offset order.
func pullRecords(t *testing.T, addr, topic string, queues int32) []*record.Message {
	t.Helper()
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var msgs []*record.Message
	for q := int32(0); q < queues; q++ {
		off := int64(0)
		for {
			h := &protocol.PullMessageRequestHeader{ConsumerGroup: "proc-reader", Topic: topic, QueueID: q, QueueOffset: off, MaxMsgNums: 32,
				SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.PullMessage, h, nil))
			cancel()
			if err != nil {
				t.Fatalf("pull %s:%d@%d from %s: %v", topic, q, off, addr, err)
			}
			if resp.Code != protocol.Success {
				if off == 0 {
					t.Logf("pull %s:%d@0 from %s: code %d %s", topic, q, addr, resp.Code, resp.Remark)
				}
				break
			}
			var rh protocol.PullMessageResponseHeader
			if err := resp.DecodeHeader(&rh); err != nil {
				t.Fatal(err)
			}
			for b := resp.Body; len(b) > 0; {
				m, n, err := record.Decode(b, true)
				if err != nil {
					t.Fatalf("decode pulled record: %v", err)
				}
				msgs = append(msgs, m)
				b = b[n:]
			}
			off = rh.NextBeginOffset
		}
	}
	return msgs
}

func sendN(t *testing.T, p *client.Producer, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i += 100 {
		msgs := make([]*client.Message, 0, 100)
		for j := i; j < min(i+100, from+n); j++ {
			msgs = append(msgs, &client.Message{Topic: topic, Body: fmt.Appendf(nil, "m%06d", j)})
		}
		if _, err := p.SendBatch(context.Background(), msgs); err != nil {
			t.Fatalf("batch at %d: %v", i, err)
		}
	}
}

func wantBodies(from, n int) []string {
	out := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("m%06d", i))
	}
	sort.Strings(out)
	return out
}

func (c *procCluster) waitCaughtUp(t *testing.T) int64 {
	t.Helper()
	var end int64
	testutil.Eventually(t, 60*time.Second, func() error {
		mi, si := c.runtime(t, c.masterAddr()), c.runtime(t, c.slaveAddr())
		if mi == nil || si == nil || mi["commitLogMaxOffset"] != si["commitLogMaxOffset"] {
			return fmt.Errorf("master %s slave %s", mi["commitLogMaxOffset"], si["commitLogMaxOffset"])
		}
		end, _ = strconv.ParseInt(mi["commitLogMaxOffset"], 10, 64)
		return nil
	})
	return end
}

// TestClusterProcMasterDown: with the master killed, consumers read from
// the slave everything that was replicated; the master restarts on its
// data, the slave catches up from where it was, and its log equals the
// master's byte for byte (no duplicates).
func TestClusterProcMasterDown(t *testing.T) {
	c := startProcCluster(t, "async_master")
	c.waitSlaveConnected(t)
	p := c.producer(t)
	sendN(t, p, "Down", 0, 2000)
	c.waitCaughtUp(t)
	c.master.kill()
	testutil.Eventually(t, 30*time.Second, func() error {
		if info := c.runtime(t, c.slaveAddr()); info == nil || info["haConnected"] == "true" {
			return fmt.Errorf("slave has not noticed the master is gone")
		}
		return nil
	})

	// The slave serves what it has: its queues hold every message.
	if got, want := pullAll(t, c.slaveAddr(), "Down", 4), wantBodies(0, 2000); !equalStrings(got, want) {
		t.Fatalf("slave served %d of %d messages", len(got), len(want))
	}
	// A consumer group reads them through the SDK, from the slave.
	po := client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.reg}},
		Group: "down-group", From: client.ConsumeFromFirst}}
	pc, err := client.NewPullConsumer(po)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe("Down", "*"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2000 && ctx.Err() == nil {
		msgs, err := pc.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			t.Logf("poll: %v", err)
		}
		for _, m := range msgs {
			seen[string(m.Body)] = true
		}
	}
	if len(seen) != 2000 {
		t.Fatalf("consumer read %d of 2000 messages from the slave", len(seen))
	}

	// The master comes back; new messages replicate; no duplicates.
	c.master.run(t)
	c.waitSlaveConnected(t)
	sendN(t, p, "Down", 2000, 500)
	end := c.waitCaughtUp(t)
	c.master.stop()
	c.slave.stop()
	if m, s := commitlogBytes(t, c.masterDir, 0, end), commitlogBytes(t, c.slaveD, 0, end); int64(len(m)) != end || !bytes.Equal(m, s) {
		t.Fatalf("after the master's restart the logs differ: master %d, slave %d bytes, end %d", len(m), len(s), end)
	}
}

// TestClusterProcSlaveRestart: a slave stopped while the master keeps
// taking messages resumes from its own end; a fresh slave started against
// a master with several segments starts at the master's last segment.
func TestClusterProcSlaveRestart(t *testing.T) {
	c := startProcCluster(t, "async_master")
	c.waitSlaveConnected(t)
	p := c.producer(t)
	body := bytes.Repeat([]byte("s"), 4000) // ~4 KiB records: several 8 MiB segments quickly
	send := func(n int) {
		for i := 0; i < n; i += 50 {
			msgs := make([]*client.Message, 50)
			for j := range msgs {
				msgs[j] = &client.Message{Topic: "Restart", Body: body}
			}
			if _, err := p.SendBatch(context.Background(), msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(1000)
	c.waitCaughtUp(t)
	c.slave.stop()
	send(3000)
	c.slave.run(t)
	c.waitSlaveConnected(t)
	end := c.waitCaughtUp(t)
	if m, s := commitlogBytes(t, c.masterDir, 0, end), commitlogBytes(t, c.slaveD, 0, end); int64(len(m)) != end || !bytes.Equal(m, s) {
		t.Fatalf("restarted slave's log differs: master %d, slave %d bytes", len(m), len(s))
	}
	segs, _ := filepath.Glob(filepath.Join(c.masterDir, "commitlog", "*"))
	if len(segs) < 2 {
		t.Fatalf("want several master segments, have %d", len(segs))
	}

	// A fresh slave (empty store) against the multi-segment master.
	c.slave.stop()
	fresh := filepath.Join(c.dir, "fresh")
	c.slave.args = append([]string{}, c.slave.args...)
	for i, a := range c.slave.args {
		if a == c.slaveD {
			c.slave.args[i] = fresh
		}
	}
	c.slaveD = fresh
	c.slave.run(t)
	c.waitSlaveConnected(t)
	end = c.waitCaughtUp(t)
	// The segment holding the end of the log (the master may have created
	// the next one, still empty, ahead of time).
	var lastBase int64
	for _, f := range segs {
		if base, err := strconv.ParseInt(filepath.Base(f), 10, 64); err == nil && base < end && base > lastBase {
			lastBase = base
		}
	}
	if m, s := commitlogBytes(t, c.masterDir, lastBase, end), commitlogBytes(t, fresh, lastBase, end); len(m) == 0 || !bytes.Equal(m, s) {
		t.Fatalf("fresh slave's log from the last segment differs: master %d, slave %d bytes", len(m), len(s))
	}
	if _, err := os.Stat(filepath.Join(fresh, "commitlog", fmt.Sprintf("%020d", int64(0)))); err == nil && lastBase > 0 {
		t.Fatal("fresh slave copied the master's first segment; it should start at the last one")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
