package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestInteropControllerOffsetsBeforeFailover: consumer offsets committed
// on the master and the delay offset its schedule service advanced reach
// the slave within moments (the slave's periodic copy is an hour away and
// the topic and group tables do not change, so only the master's offset
// notice can bring them); the master is killed (-9) and the promoted
// slave serves them.
func TestInteropControllerOffsetsBeforeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t, "broker.slave_sync_interval=1h")
	m := c.waitHealthy(t)
	s := 1 - m
	rc := newRemotingClient(t)
	invoke := func(addr string, code int32, h protocol.HeaderEncoder) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(code, h, nil))
		if err != nil {
			return nil, err
		}
		if resp.Code != protocol.Success {
			return nil, fmt.Errorf("%s answered %d to %d: %s", addr, resp.Code, code, resp.Remark)
		}
		return resp.Body, nil
	}
	const topic, group = "CtlOffsets", "ctl-offsets-cg"
	consumerOffsets := func(addr string) (map[int32]int64, error) {
		body, err := invoke(addr, protocol.GetAllConsumerOffset, nil)
		if err != nil {
			return nil, err
		}
		var w protocol.ConsumerOffsetSerializeWrapper
		if err := protocol.DecodeJSON(body, &w); err != nil {
			return nil, err
		}
		return w.OffsetTable[topic+"@"+group], nil
	}
	delayOffset := func(addr string) (int64, error) {
		body, err := invoke(addr, protocol.GetAllDelayOffset, nil)
		if err != nil {
			return 0, err
		}
		var f struct {
			OffsetTable map[int32]int64 `json:"offsetTable"`
		}
		if err := protocol.DecodeJSON(body, &f); err != nil {
			return 0, err
		}
		return f.OffsetTable[1], nil
	}
	dataVersion := func(addr string) (protocol.DataVersion, error) {
		body, err := invoke(addr, protocol.GetAllTopicConfig, nil)
		var tw protocol.TopicConfigSerializeWrapper
		if err == nil {
			err = protocol.DecodeJSON(body, &tw)
		}
		return tw.DataVersion, err
	}
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	p := newProducer(t, c.clients(), "ctl-offsets-p")
	sendDelayed := func(body string) {
		msg := primitive.NewMessage(topic, []byte(body))
		msg.WithDelayTimeLevel(1)
		if res, err := p.SendSync(context.Background(), msg); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %+v %v", body, res, err)
		}
	}
	for i := range 12 {
		if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, fmt.Appendf(nil, "off-%d", i))); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
	}
	sendDelayed("delayed-0")
	waitDelay := func(addr string, want int64) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			got, err := delayOffset(addr)
			if err == nil && got != want {
				err = fmt.Errorf("%s: delay offset of level 1 is %d, want %d", addr, got, want)
			}
			return err
		})
	}
	waitDelay(c.bAddrs[m], 1)
	// From here on the topic and group tables stay as the slave copied
	// them last.
	testutil.Eventually(t, 30*time.Second, func() error {
		mv, err := dataVersion(c.bAddrs[m])
		if err != nil {
			return err
		}
		sv, err := dataVersion(c.bAddrs[s])
		if err == nil && mv != sv {
			err = fmt.Errorf("slave's topic table at %+v, master's at %+v", sv, mv)
		}
		return err
	})
	want := map[int32]int64{0: 1, 1: 2, 2: 3, 3: 2}
	for q, off := range want {
		if _, err := invoke(c.bAddrs[m], protocol.UpdateConsumerOffset,
			&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: off}); err != nil {
			t.Fatalf("commit queue %d: %v", q, err)
		}
	}
	sendDelayed("delayed-1")
	waitDelay(c.bAddrs[m], 2)
	has := func(addr string) error {
		got, err := consumerOffsets(addr)
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("%s has offsets %v, want %v", addr, got, want)
		}
		d, err := delayOffset(addr)
		if err == nil && d != 2 {
			err = fmt.Errorf("%s has delay offset %d for level 1, want 2", addr, d)
		}
		return err
	}
	testutil.Eventually(t, 20*time.Second, func() error { return has(c.bAddrs[s]) })
	c.brokers[m].kill9()
	c.waitPromoted(t, s)
	if err := has(c.bAddrs[s]); err != nil {
		t.Fatalf("after the failover: %v", err)
	}
}

// waitPromoted waits until the controller names broker j master and j
// holds its lease: its promotion (with its import of the log's queues) is
// done.
func (c *ctlCluster) waitPromoted(t *testing.T, j int) {
	t.Helper()
	c.waitMasterIs(t, j)
	testutil.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := c.adm.BrokerRuntimeInfo(ctx, c.bAddrs[j])
		if err != nil || info["masterLease"] != "true" {
			return fmt.Errorf("new master has no lease yet (%v)", err)
		}
		return nil
	})
}
