//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// restartCut SIGKILLs the (only) controller replica, cuts its raft.log
// before its last entry of operation op (its first with first set; it
// loses that committed change and everything after it) and starts it
// again.
func (c *ctlProc) restartCut(t *testing.T, op string, first bool) {
	t.Helper()
	c.ctls[0].kill()
	dir := filepath.Join(c.dir, "c0")
	if snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin")); len(snaps) > 0 {
		t.Fatalf("the replica took a snapshot (%v): cutting the log loses nothing", snaps)
	}
	cutEntry(t, filepath.Join(dir, "raft", "raft.log"), op, first)
	c.ctls[0].run(t)
}

// cutEntry truncates the controller's raft.log (format in
// controller/logstore.go: len 4 | crc 4 | payload; an entry's payload is
// kind 1 | index 8 | term 8 | type 1 | appendedAt 8 | dataLen 4 | data)
// before its last entry of operation op (its first with first set).
func cutEntry(t *testing.T, path, op string, first bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := -1
	for off := 0; off+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if off+8+n > len(data) {
			break
		}
		p := data[off+8 : off+8+n]
		if len(p) >= 30 && p[0] == 1 {
			dl := int(binary.BigEndian.Uint32(p[26:]))
			if 30+dl <= len(p) && bytes.Contains(p[30:30+dl], []byte(`"op":"`+op+`"`)) && (cut < 0 || !first) {
				cut = off
			}
		}
		off += 8 + n
	}
	if cut < 0 {
		t.Fatalf("no %s entry in %s (%d bytes)", op, path, len(data))
	}
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
}

// TestClusterControllerLostSyncSetChange: the controller's replica loses
// its last committed sync state set change (raft.log tail cut while it is
// down), so it holds the master's group at an older set epoch with the
// slave missing, while the master acts on the newer set. The master must
// propose its set again (it ignores the older view otherwise, and the two
// never agree), so that killing it afterwards fails over to the slave
// instead of "none alive in the sync state set".
func TestClusterControllerLostSyncSetChange(t *testing.T) {
	c := startCtlProc(t, ctlProcOpts{brokers: 2, controllers: 1, minISR: 1})
	m := c.waitHealthy(t, 2)
	g0, _, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	c.restartCut(t, "alterSyncStateSet", false)

	// The controller comes back with the older set, then takes the
	// master's again.
	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterEpoch != g0.MasterEpoch || g.MasterAddr != c.bAddrs[m] {
			return fmt.Errorf("master %s epoch %d, want %s epoch %d", g.MasterAddr, g.MasterEpoch, c.bAddrs[m], g0.MasterEpoch)
		}
		if len(g.SyncStateSet) != 2 {
			return fmt.Errorf("controller's sync state set %v (epoch %d), the master's %v (epoch %d)",
				g.SyncStateSet, g.SyncStateSetEpoch, g0.SyncStateSet, g0.SyncStateSetEpoch)
		}
		return nil
	})
	if n := logCount(t, c.brokers[m].log, "proposing the master's set again"); n == 0 {
		t.Fatal("the master never proposed its set again: the log cut lost nothing")
	}

	c.brokers[m].kill()
	other := c.bAddrs[1-m]
	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterAddr != other || g.MasterEpoch <= g0.MasterEpoch {
			return errors.New("no failover to the slave yet")
		}
		return nil
	})
}

// failOverAndBack starts 1 controller and 2 brokers, kills the first
// master m (its slave s is elected), restarts m as s's slave and waits
// until both are in the set; g0 and g1 are the group before and after.
func failOverAndBack(t *testing.T) (c *ctlProc, m, s int, g0, g1 protocol.ControllerGroup) {
	t.Helper()
	c = startCtlProc(t, ctlProcOpts{brokers: 2, controllers: 1, minISR: 1})
	m = c.waitHealthy(t, 2)
	g0, _, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	c.brokers[m].kill()
	s = 1 - m
	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterAddr != c.bAddrs[s] || g.MasterEpoch <= g0.MasterEpoch {
			return errors.New("no failover to the slave yet")
		}
		return nil
	})
	c.brokers[m].run(t)
	if c.waitHealthy(t, 2) != s {
		t.Fatal("the old master took over again")
	}
	if g1, _, err = c.group(); err != nil {
		t.Fatal(err)
	}
	return c, m, s, g0, g1
}

// TestClusterControllerLostElection: the controller's replica loses its
// last election (raft.log cut before it while the replica is down): it
// comes back naming the old master at the old epoch, while that broker
// runs as the new master's slave at the newer epoch and the new master
// acts at it. The replica must not keep the old view (the old master is
// alive, so it never elected anyone, and it fenced the real master: the
// group stayed without a leased master for good) nor go back to it: it
// elects the broker acting as master again, at an epoch above every one
// the brokers report, and the group is writable.
func TestClusterControllerLostElection(t *testing.T) {
	c, m, s, g0, g1 := failOverAndBack(t)

	c.restartCut(t, "elect", false)

	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterAddr != c.bAddrs[s] || g.MasterEpoch <= g1.MasterEpoch {
			return fmt.Errorf("controller names master %s at epoch %d; want %s above epoch %d (the old master %s was at %d)",
				g.MasterAddr, g.MasterEpoch, c.bAddrs[s], g1.MasterEpoch, c.bAddrs[m], g0.MasterEpoch)
		}
		if info := c.runtime(g.MasterAddr); info["masterLease"] != "true" {
			return fmt.Errorf("master %s has no lease", g.MasterAddr)
		}
		return nil
	})
	if n := logCount(t, c.ctls[0].log, "the controller's state is behind"); n == 0 {
		t.Fatal("the controller never repaired its view: the log cut lost nothing")
	}
	if info := c.runtime(c.bAddrs[m]); info["masterLease"] == "true" {
		t.Fatal("the old master holds a lease too")
	}
	p := c.producer(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		r, err := p.Send(context.Background(), &client.Message{Topic: "LostElection", Body: []byte("x")})
		if err == nil && r.Status != client.SendOK {
			err = fmt.Errorf("status %v", r.Status)
		}
		return err
	})
	// The old master follows the repaired master and rejoins its set.
	c.waitHealthy(t, 2)
}

// TestClusterControllerBehindSetLacksFollowers: the controller's replica
// loses everything from its first sync state set change on (raft.log cut
// while it is down): it names the first master, broker m, at epoch 1 with
// the set [m], while m runs as the slave of broker s, elected at epoch 2
// since, and s, the master at epoch 2, is dead too. The replica took its
// master as deposed and picked from its set without it: nobody, for good
// ("none alive in the sync state set"). It elects m, the live follower of
// epoch 2, above that epoch, and m has every message s acknowledged.
func TestClusterControllerBehindSetLacksFollowers(t *testing.T) {
	c, m, s, _, g1 := failOverAndBack(t)
	// Acknowledged by s with m in its set: m has them.
	p := c.producer(t)
	const n = 20
	for i := range n {
		testutil.Eventually(t, 30*time.Second, func() error {
			r, err := p.Send(context.Background(), &client.Message{Topic: "BehindSet", Body: []byte(fmt.Sprintf("BehindSet-%d", i))})
			if err == nil && r.Status != client.SendOK {
				err = fmt.Errorf("status %v", r.Status)
			}
			return err
		})
	}

	c.ctls[0].kill()
	c.brokers[s].kill()
	c.restartCut(t, "alterSyncStateSet", true)

	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterAddr != c.bAddrs[m] || g.MasterEpoch <= g1.MasterEpoch {
			return fmt.Errorf("controller names master %s at epoch %d (set %v); want %s above epoch %d",
				g.MasterAddr, g.MasterEpoch, g.SyncStateSet, c.bAddrs[m], g1.MasterEpoch)
		}
		if info := c.runtime(g.MasterAddr); info["masterLease"] != "true" {
			return fmt.Errorf("master %s has no lease", g.MasterAddr)
		}
		return nil
	})
	if n := logCount(t, c.ctls[0].log, "the controller's state is behind"); n == 0 {
		t.Fatal("the controller never saw its state behind: the log cut lost nothing")
	}
	c.brokers[m].stop()
	st, err := store.Open(c.storeOptions(c.bDirs[m]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	got := bodies(t, st, "BehindSet")
	for i := range n {
		if b := fmt.Sprintf("BehindSet-%d", i); got[b] == 0 {
			t.Errorf("acknowledged %s missing on the new master", b)
		}
	}
}
