package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// A client that closes its connection right after a heartbeat (a
// consumer's Close while a periodic heartbeat is in flight: it
// unregisters and closes without waiting for the heartbeat's answer) is
// not a member of its group afterwards. The heartbeat used to be served
// after the unregister and the close when the heartbeat workers were
// busy, and registered the client again on its dead connection: it
// stayed a member until it expired (two minutes), holding a share of the
// group's queues that nobody consumed.
func TestBrokerHeartbeatAfterCloseRegistersNothing(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	const rounds = 200
	for i := range rounds {
		c, err := remoting.NewClient(remoting.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		group, cid := fmt.Sprintf("hb-close-%d", i), fmt.Sprintf("hb-client-%d", i)
		body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: cid, ConsumerDataSet: []*protocol.ConsumerData{{
			GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET"}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.InvokeAsync(ctx, b.Addr(), protocol.NewRequest(protocol.HeartBeat, nil, body), 30*time.Second, func(*protocol.Command, error) {}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Invoke(ctx, b.Addr(), protocol.NewRequest(protocol.UnregisterClient,
			&protocol.UnregisterClientRequestHeader{ClientID: cid, ConsumerGroup: group}, nil)); err != nil {
			t.Fatal(err)
		}
		cancel()
		_ = c.Close()
	}
	// Every heartbeat was served once the heartbeat workers are idle.
	testutil.WaitFor(t, 30*time.Second, "the heartbeat workers idle", func() bool {
		st := b.srv.PoolStats(remoting.PoolHeartbeat)
		return st.Queued == 0 && st.Running == 0
	})
	// A heartbeat served on a connection whose close the broker has not
	// handled yet is undone when it does; the bug kept the member until it
	// expired (two minutes), so 10 s tells them apart.
	testutil.Eventually(t, 10*time.Second, func() error {
		left := 0
		for i := range rounds {
			if len(b.consumers.ClientIDs(fmt.Sprintf("hb-close-%d", i))) > 0 {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d clients that closed their connection are still members of their group", left, rounds)
		}
		return nil
	})
}
