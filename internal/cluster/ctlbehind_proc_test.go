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
)

// restartCut SIGKILLs the (only) controller replica, cuts its raft.log
// before its last entry of operation op (it loses that committed change
// and everything after it) and starts it again.
func (c *ctlProc) restartCut(t *testing.T, op string) {
	t.Helper()
	c.ctls[0].kill()
	dir := filepath.Join(c.dir, "c0")
	if snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin")); len(snaps) > 0 {
		t.Fatalf("the replica took a snapshot (%v): cutting the log loses nothing", snaps)
	}
	cutLastEntry(t, filepath.Join(dir, "raft", "raft.log"), op)
	c.ctls[0].run(t)
}

// cutLastEntry truncates the controller's raft.log (format in
// controller/logstore.go: len 4 | crc 4 | payload; an entry's payload is
// kind 1 | index 8 | term 8 | type 1 | appendedAt 8 | dataLen 4 | data)
// before its last entry of operation op.
func cutLastEntry(t *testing.T, path, op string) {
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
			if 30+dl <= len(p) && bytes.Contains(p[30:30+dl], []byte(`"op":"`+op+`"`)) {
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
	c.restartCut(t, "alterSyncStateSet")

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
	c := startCtlProc(t, ctlProcOpts{brokers: 2, controllers: 1, minISR: 1})
	m := c.waitHealthy(t, 2)
	g0, _, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	c.brokers[m].kill()
	s := 1 - m
	var g1 protocol.ControllerGroup
	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if g.MasterAddr != c.bAddrs[s] || g.MasterEpoch <= g0.MasterEpoch {
			return errors.New("no failover to the slave yet")
		}
		g1 = g
		return nil
	})
	c.brokers[m].run(t)
	if c.waitHealthy(t, 2) != s {
		t.Fatal("the old master took over again")
	}
	g1, _, err = c.group()
	if err != nil {
		t.Fatal(err)
	}

	c.restartCut(t, "elect")

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
