package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// routePerm returns the permission registry addr publishes for broker
// name's queues of topic (-1 when absent).
func routePerm(t *testing.T, rc *remoting.Client, addr, topic, name string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil))
	if err != nil || resp.Code != protocol.Success {
		return -1
	}
	var rd protocol.TopicRouteData
	if err := json.Unmarshal(resp.Body, &rd); err != nil {
		t.Fatal(err)
	}
	for _, q := range rd.QueueDatas {
		if q.BrokerName == name {
			return q.Perm
		}
	}
	return -1
}

// A broker whose disk fills refuses sends with SERVICE_NOT_AVAILABLE,
// tells the registries at once (its queues lose write permission), so the
// SDK's producers go to the other broker; when space frees it takes
// writes again and says so, by itself, within seconds. Nothing
// acknowledged is lost.
func TestClusterDiskFullRefusesThenResumes(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.1)
	c, err := Start(context.Background(), Options{Dir: t.TempDir(), Brokers: 2, Broker: func(i int, o *broker.Options) {
		if i == 0 {
			o.Store.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := newProducer(t, c)
	const topic = "DiskFullTopic"
	send := func(body string) (*client.SendResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)})
	}
	for i := range 20 {
		if _, err := send(fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	reg := c.RegistryAddrs()[0]
	full := c.BrokerName(0)
	if perm := routePerm(t, rc, reg, topic, full); perm&protocol.PermWrite == 0 {
		t.Fatalf("before: perm %d", perm)
	}

	usage.Store(0.95)
	testutil.Eventually(t, 5*time.Second, func() error {
		if perm := routePerm(t, rc, reg, topic, full); perm&protocol.PermWrite != 0 || perm&protocol.PermRead == 0 {
			return fmt.Errorf("route perm of the full broker %d, want read only", perm)
		}
		return nil
	})
	if refused, why := c.Broker(0).WritesRefused(); !refused {
		t.Fatal("full broker does not say it refuses writes")
	} else if err := c.Broker(0).Ready(); err == nil {
		t.Fatalf("full broker ready (refusing: %s)", why)
	}
	// A send straight to it is refused with the code clients retry elsewhere.
	direct := newRemotingSend(t, rc, c.BrokerAddr(0), topic)
	if direct.Code != protocol.ServiceNotAvailable {
		t.Fatalf("send to the full broker: code %d %s", direct.Code, direct.Remark)
	}
	// The SDK's producer sends everything to the other broker.
	var during []*client.SendResult
	testutil.Eventually(t, 5*time.Second, func() error {
		during = during[:0]
		for i := range 20 {
			r, err := send(fmt.Sprint("during-", i))
			if err != nil {
				return err
			}
			during = append(during, r)
		}
		return nil
	})
	for _, r := range during {
		if r.Queue.BrokerName == full {
			t.Fatalf("a send went to the full broker: %+v", r.Queue)
		}
	}

	usage.Store(0.5)
	testutil.Eventually(t, 5*time.Second, func() error {
		if perm := routePerm(t, rc, reg, topic, full); perm&protocol.PermWrite == 0 {
			return fmt.Errorf("route perm of the recovered broker %d", perm)
		}
		if refused, why := c.Broker(0).WritesRefused(); refused {
			return errors.New(why)
		}
		return nil
	})
	if direct := newRemotingSend(t, rc, c.BrokerAddr(0), topic); direct.Code != protocol.Success {
		t.Fatalf("send after space freed: code %d %s", direct.Code, direct.Remark)
	}
	// Every message sent before, during and after is stored (the consume
	// queues are built after the reply, so wait for the last one).
	testutil.Eventually(t, 5*time.Second, func() error {
		total := int64(0)
		for i := range 2 {
			s := c.Broker(i).Store()
			for _, q := range s.QueueIDs(topic) {
				total += s.MaxOffset(topic, q)
			}
		}
		if total < 41 {
			return fmt.Errorf("%d messages stored, want at least 41", total)
		}
		return nil
	})
}

// newRemotingSend sends one message straight to a broker.
func newRemotingSend(t *testing.T, rc *remoting.Client, addr, topic string) *protocol.Command {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: broker.AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.SendMessage, h, []byte("direct")))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
