package rocketmq

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropControllerLeaderKill9DuringElection: under rocketmq-client-go
// producers and a push consumer, the master broker is killed with SIGKILL
// and, while the controller replicas elect its successor, so is the
// controller leader. The remaining two replicas elect a leader, which
// elects the slave master; the producers' sends are acknowledged again,
// and once the killed controller and broker are back (the broker as a
// slave with the new master's log) every acknowledged message has been
// consumed.
func TestInteropControllerLeaderKill9DuringElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlLeaderKill", "ctl-leader-kill-g"
	c, m, got, l := startCtlLoad(t, topic, group, 2)
	leader := c.leader(t)

	killed := time.Now()
	c.brokers[m].kill9()
	// The master's loss is seen at its heartbeat timeout (2 s here): the
	// leader is killed within it, before or while it elects.
	time.Sleep(time.Second)
	c.ctls[leader].kill9()
	testutil.WaitFor(t, 90*time.Second, "sends acknowledged by the new master", func() bool { return l.ackedSince(killed) >= 200 })
	t.Logf("first 200 sends after the kills acknowledged within %v", time.Since(killed).Round(time.Millisecond))
	if nm := c.waitHealthyOne(t); nm == m {
		t.Fatalf("broker %d is master again", m)
	}
	c.leader(t) // the two replicas left have a leader

	c.ctls[leader].run(t)
	c.rejoinAndConsumeAll(t, m, got, l)
}
