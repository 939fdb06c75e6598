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

// TestClusterBrokerReadiness: master and slave become ready once
// registered (and, for the slave, once its master is known); a master
// whose registries went away stops being ready after three register
// intervals and says why.
func TestClusterBrokerReadiness(t *testing.T) {
	fast := func(_ int, o *broker.Options) { o.RegisterInterval = 100 * time.Millisecond }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir(), Slaves: true, Broker: fast, Slave: fast})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	isNil := func(err error) bool { return err == nil }
	waitErr(t, "master ready", c.Broker(0).Ready, isNil)
	waitErr(t, "slave ready", c.Slave(0).Ready, isNil)
	if err := c.StopRegistry(0); err != nil {
		t.Fatal(err)
	}
	waitErr(t, "master without registry", c.Broker(0).Ready, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "no registry accepted a registration since")
	})
}
