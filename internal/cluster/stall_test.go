//go:build cluster

package cluster

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterControllerStalledMaster: the master stalls (SIGSTOP: its
// sockets stay open, nothing answers) under a sync-replicated load, long
// enough for the controller to elect one of its slaves. Resumed, it finds
// a newer master; the writes it held (received before the stall, answered
// after) must not be acknowledged unless the new master has them: every
// acknowledged message is on every broker once, the logs byte-identical,
// and the old master rejoins as a slave.
func TestClusterControllerStalledMaster(t *testing.T) {
	c := startCtlProc(t, ctlProcOpts{brokers: 3, controllers: 1, minISR: 2})
	m := c.waitHealthy(t, 3)
	g, _, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	p := c.producer(t)
	l := startLoad(p, "Stall", 6)
	waitAcked(t, l, 200)
	old := c.bAddrs[m]
	proc := c.brokers[m].cmd.Process
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) })
	stopped := time.Now()
	next := waitTakenOver(t, c, l, g, old, stopped)
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	c.waitHealthy(t, 3)
	testutil.Eventually(t, 30*time.Second, func() error {
		if info := c.runtime(old); info["brokerRole"] != "SLAVE" {
			return fmt.Errorf("old master's role %q", info["brokerRole"])
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // writes on the new master after the rejoin
	recs := l.end()
	// Answers the old master sent as it stopped may arrive a moment
	// after, or (decided before the stop, their socket write cut by it)
	// just after it resumed; ackedOnce below checks that each of those
	// is on every broker. A send begun after the stop reached the old
	// master only while it was stalled: once resumed, its lease has run
	// out (it stalled for longer than the controller's heartbeat
	// timeout) and it acknowledges none of those.
	late := 0
	for _, r := range recs {
		if r.acked && r.host == old && r.at.After(stopped) {
			late++
			if r.at.After(resumed) && r.sent.After(stopped) {
				t.Errorf("the old master acknowledged a write %v after it resumed (stalled %v, its lease long gone)",
					r.at.Sub(resumed), resumed.Sub(stopped))
			}
		}
	}
	t.Logf("new master %s at epoch %d; stalled %v; %d answers of the old master arrived after the stop",
		next.MasterAddr, next.MasterEpoch, resumed.Sub(stopped).Round(time.Millisecond), late)
	stores := c.stopAndOpen(t)
	sameLogs(t, stores)
	ackedOnce(t, stores, "Stall", recs)
}

// waitAcked waits until the load has n acknowledged writes.
func waitAcked(t *testing.T, l *load, n int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := l.acked(); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// waitTakenOver waits until the controller has elected a master other than
// old at an epoch past g's, and that master acknowledged a write of the
// load made after since; it returns the new group.
func waitTakenOver(t *testing.T, c *ctlProc, l *load, g protocol.ControllerGroup, old string, since time.Time) protocol.ControllerGroup {
	t.Helper()
	var next protocol.ControllerGroup
	testutil.Eventually(t, 30*time.Second, func() error {
		ng, _, err := c.group()
		if err != nil || ng.MasterEpoch <= g.MasterEpoch || ng.MasterAddr == old {
			return fmt.Errorf("no new master yet (%v)", err)
		}
		next = ng
		return nil
	})
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, ok := l.firstAckAfter(since, old); !ok {
			return errors.New("no write acknowledged by the new master yet")
		}
		return nil
	})
	return next
}
