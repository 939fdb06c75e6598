package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
)

// waitErr polls fn until ok accepts its error or the deadline passes.
func waitErr(t *testing.T, what string, fn func() error, ok func(error) bool) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, func() error {
		if err := fn(); !ok(err) {
			return fmt.Errorf("%s: last readiness %v", what, err)
		}
		return nil
	})
}

// startReady starts a master and its slave with opts and waits until both
// are ready.
func startReady(t *testing.T, opts func(int, *broker.Options)) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel) // the registry lives as long as ctx
	c, err := Start(ctx, Options{Dir: t.TempDir(), Slaves: true, Broker: opts, Slave: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	isNil := func(err error) bool { return err == nil }
	waitErr(t, "master ready", c.Broker(0).Ready, isNil)
	waitErr(t, "slave ready", c.Slave(0).Ready, isNil)
	return c
}

// TestClusterBrokerReadiness: master and slave become ready once
// registered (and, for the slave, once its master is known); a master
// whose registries went away stops being ready after three register
// intervals and says why.
func TestClusterBrokerReadiness(t *testing.T) {
	c := startReady(t, func(_ int, o *broker.Options) { o.RegisterInterval = 100 * time.Millisecond })
	if err := c.StopRegistry(0); err != nil {
		t.Fatal(err)
	}
	waitErr(t, "master without registry", c.Broker(0).Ready, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "no registry accepted a registration since")
	})
}

// TestClusterSlaveReadinessWithoutMaster: a slave whose master is gone
// (stopped; the registry keeps no master for it, the slave still knows
// its address) stops being ready once it has heard nothing from it for the
// HA idle timeout, and says why; its replication lag in time grows from
// the moment it lost the session instead of staying at "caught up".
func TestClusterSlaveReadinessWithoutMaster(t *testing.T) {
	c := startReady(t, func(_ int, o *broker.Options) {
		o.RegisterInterval = 100 * time.Millisecond
		o.HA.HeartbeatInterval = 100 * time.Millisecond
		o.HA.IdleTimeout = time.Second
	})
	slave := c.Slave(0)
	testutil.Eventually(t, 15*time.Second, func() error {
		if _, behind, ok := slave.ReplicationLag(); !ok || behind != 0 {
			return fmt.Errorf("caught-up slave: lag %v %v", behind, ok)
		}
		return nil
	})
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	waitErr(t, "slave without master", slave.Ready, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "slave not replicating") && strings.Contains(err.Error(), "heard nothing from its master since")
	})
	testutil.Eventually(t, 15*time.Second, func() error {
		if _, behind, ok := slave.ReplicationLag(); !ok || behind < time.Second {
			return fmt.Errorf("slave without master: lag %v %v, want over 1 s", behind, ok)
		}
		return nil
	})
}
