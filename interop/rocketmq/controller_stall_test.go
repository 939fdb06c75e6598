package rocketmq

import (
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropControllerStallKeepsMaster: a one-replica controller
// stopped (SIGSTOP) for 5 s, past the heartbeat timeout (2 s), and
// resumed (SIGCONT) heard no heartbeat meanwhile, while the master kept
// sending them (they wait in its sockets): it gives the master one more
// heartbeat interval and keeps it. It found every broker dead at its
// first scan and elected the slave. A master that is stopped itself is
// still replaced (the control). (With three replicas stopped together,
// the one elected leader after the stall gives the masters a timeout
// anyway.)
func TestInteropControllerStallKeepsMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlClusterOf(t, 1)
	m := c.waitHealthy(t)
	before, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.ctls {
		n.signal(syscall.SIGSTOP)
	}
	time.Sleep(5 * time.Second) // the stall under test: past the heartbeat timeout
	for _, n := range c.ctls {
		n.signal(syscall.SIGCONT)
	}
	testutil.WaitFor(t, 30*time.Second, "a controller's stall noticed", func() bool {
		n := 0
		for _, cn := range c.ctls {
			n += countIn(cn.log, "scan ran late")
		}
		return n > 0
	})
	// Three heartbeat timeouts: any election would have happened.
	until := time.Now().Add(6 * time.Second)
	for time.Now().Before(until) {
		g, err := c.group()
		if err == nil && (g.MasterEpoch != before.MasterEpoch || g.MasterAddr != before.MasterAddr) {
			t.Fatalf("the controllers elected a new master after their own stall: %s at epoch %d, was %s at %d",
				g.MasterAddr, g.MasterEpoch, before.MasterAddr, before.MasterEpoch)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The control: a master that stops heartbeating is replaced.
	c.brokers[m].signal(syscall.SIGSTOP)
	t.Cleanup(func() { c.brokers[m].signal(syscall.SIGCONT) })
	c.waitMasterIs(t, 1-m)
	if g, err := c.group(); err == nil && g.MasterEpoch <= before.MasterEpoch {
		t.Fatalf("new master at epoch %d, not above %d", g.MasterEpoch, before.MasterEpoch)
	}
}
