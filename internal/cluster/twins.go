package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smartgo/smartgo/broker"
)

// TwinTopic is the system topic whose queues are the twin shards.
const TwinTopic = broker.TwinTopic

// OpenTwins opens twin shards (broker.OpenTwins, shards per broker) on
// every running master and waits until the registries route the twin
// topic. Call the returned close function before closing the cluster.
func (c *Cluster) OpenTwins(ctx context.Context, shards int) (closeTwins func() error, err error) {
	opts := broker.TwinOptions{Shards: shards, SnapshotInterval: time.Hour}
	var open []*broker.Twins
	closeAll := func() error {
		var errs []error
		for _, t := range open {
			errs = append(errs, t.Close())
		}
		return errors.Join(errs...)
	}
	for i := range c.brokerOpts {
		b := c.Broker(i)
		if b == nil {
			continue
		}
		t, err := broker.OpenTwins(b, opts)
		if err != nil {
			_ = closeAll()
			return nil, fmt.Errorf("cluster: twins on broker %d: %w", i, err)
		}
		open = append(open, t)
	}
	if err := c.WaitRoute(ctx, TwinTopic); err != nil {
		_ = closeAll()
		return nil, err
	}
	return closeAll, nil
}
